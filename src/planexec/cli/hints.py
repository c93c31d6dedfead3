"""What to do after a run that failed: lines that say why, in words a CLI user can act on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planexec.cli.preflight import missing_inputs, missing_message
from planexec.llm.models import MISSING_KEY
from planexec.plan.records import record_key
from planexec.tools import ToolRegistry


def failed_steps(values: Mapping[str, Any]) -> list[int]:
    """Return the ids of the final plan's steps that failed."""
    plan = values.get("plan") or {}
    records = values.get("steps") or {}
    return [
        s["id"]
        for s in plan.get("steps", [])
        if (records.get(record_key(s["id"])) or {}).get("status") == "failed"
    ]


def no_replanner(failed: list[int], problem: str) -> str:
    """Say that nothing could revise the plan around ``failed`` steps: no planner model."""
    which = f"step {failed[0]}" if len(failed) == 1 else f"steps {', '.join(map(str, failed))}"
    how = "set OPENAI_API_KEY or --planner-model" if problem == MISSING_KEY else problem
    return f"{which} failed; no planner model is configured to revise the plan ({how})"


def missing_data(
    values: Mapping[str, Any], root: Path, tools: ToolRegistry, failed: list[int]
) -> str | None:
    """Say how to give the failed steps the files they read that lie here but not in ``root``.

    The same words as the check of a ``--plan`` before it runs (:func:`missing_message`),
    for the files of a failed step that exist in the current folder.
    """
    plan = values.get("plan")
    if not plan or not failed:
        return None
    missing = [
        (sid, name)
        for sid, name in missing_inputs(plan, root, tools)
        if sid in failed and _here(name)
    ]
    return missing_message(missing, root) if missing else None


def failure_hints(
    values: Mapping[str, Any], root: Path, tools: ToolRegistry, no_planner: str | None
) -> list[str]:
    """Return the hints a failed run's end shows (none for a run that did not fail a step).

    ``no_planner``: why no planner model can be made, when the run could not revise its plan.
    """
    failed = failed_steps(values)
    if not failed:
        return []
    hints = [no_replanner(failed, no_planner)] if no_planner else []
    found = missing_data(values, root, tools, failed)
    return [*hints, *([found] if found else [])]


def _here(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):
        return False
