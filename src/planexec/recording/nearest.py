"""What a call without a recording differs in from the nearest recording of its tool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

MAX_SHOWN = 80
"""Longest value shown in a difference (longer ones are cut)."""
MAX_KEYS = 5
"""Most differing arguments named."""

_ABSENT = object()


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Return the arguments that differ, sorted, each as ``name: recorded X, now Y``."""
    keys = sorted(set(recorded) | set(now))
    return [
        f"{key}: recorded {_shown(recorded.get(key, _ABSENT))}, now {_shown(now.get(key, _ABSENT))}"
        for key in keys
        if recorded.get(key, _ABSENT) != now.get(key, _ABSENT)
    ]


def nearest(recorded: Sequence[dict[str, Any]], now: dict[str, Any]) -> list[str]:
    """Return the differences from the recording that differs in fewest arguments (first wins)."""
    return min((differences(args, now) for args in recorded), key=len)


def said(tool: str, diffs: list[str]) -> str:
    """Return the message of a call of ``tool`` with no recording, ``diffs`` from the nearest."""
    shown = "; ".join(diffs[:MAX_KEYS])
    more = f"; and {len(diffs) - MAX_KEYS} more" if len(diffs) > MAX_KEYS else ""
    return (
        f"no recording of {tool} with these arguments; nearest recording differs in {shown}{more}"
    )


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    if isinstance(value, str):
        text = repr(value)
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
