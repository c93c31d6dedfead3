"""What a call without a recording differs in from the nearest recording of its tool.

Values are compared as typed JSON (``true``, ``1`` and ``1.0`` differ); two values that look
the same on screen (``café`` written two ways in Unicode) are shown with escapes.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

from planexec.recording.files import canonical

MAX_SHOWN = 80
"""Longest value shown in a difference (longer ones are cut)."""
MAX_KEYS = 5
"""Most differing arguments named."""

CHANGED = "changed to be kept (a secret, a huge number, a NUL or a NaN)"
"""How a difference in an argument changed to be kept is said."""

_ABSENT = object()


def differences(
    recorded: dict[str, Any],
    now: dict[str, Any],
    recorded_changed: Sequence[str] = (),
    now_changed: Sequence[str] = (),
) -> list[str]:
    """Return the arguments that differ, sorted, each as ``name: recorded X, now Y``.

    An argument path changed to be kept in one call and not the other is named too.
    """
    keys = sorted(set(recorded) | set(now))
    said = [
        _difference(key, recorded.get(key, _ABSENT), now.get(key, _ABSENT))
        for key in keys
        if _json(recorded.get(key, _ABSENT)) != _json(now.get(key, _ABSENT))
    ]
    for path in sorted(set(recorded_changed) ^ set(now_changed)):
        when = "in the recording, not now" if path in recorded_changed else "now, not recorded"
        said.append(f"{path}: {CHANGED} {when}")
    return said


def nearest(
    recorded: Sequence[tuple[dict[str, Any], Sequence[str]]],
    now: dict[str, Any],
    changed: Sequence[str] = (),
) -> list[str]:
    """Return the differences from the recording that differs in fewest arguments (first wins).

    ``recorded`` holds each recording's arguments and the argument paths changed to keep them.
    """
    return min((differences(args, now, done, changed) for args, done in recorded), key=len)


def said(tool: str, diffs: list[str]) -> str:
    """Return the message of a call of ``tool`` with no recording, ``diffs`` from the nearest."""
    shown = "; ".join(diffs[:MAX_KEYS])
    more = f"; and {len(diffs) - MAX_KEYS} more" if len(diffs) > MAX_KEYS else ""
    return (
        f"no recording of {tool} with these arguments; nearest recording differs in {shown}{more}"
    )


def _json(value: Any) -> str | None:
    return None if value is _ABSENT else canonical(value)


def _difference(key: str, recorded: Any, now: Any) -> str:
    before, after = _shown(recorded), _shown(now)
    if _looks_alike(before, after):  # e.g. NFC and NFD: escapes tell them apart
        before, after = _shown(recorded, escaped=True), _shown(now, escaped=True)
    return f"{key}: recorded {before}, now {after}"


def _looks_alike(one: str, other: str) -> bool:
    return unicodedata.normalize("NFKC", one) == unicodedata.normalize("NFKC", other)


def _shown(value: Any, *, escaped: bool = False) -> str:
    if value is _ABSENT:
        return "(absent)"
    if isinstance(value, str):
        text = ascii(value) if escaped else repr(value)
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=escaped, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
