"""What changed between two versions of a plan, one line per change."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from planexec.cli.render import tool_cell
from planexec.cli.ui import styled
from planexec.state import PlanDoc, StepDoc

FIELDS = ("tool", "tools", "args", "description", "depends_on", "expected_output")
LONGEST = 300
"""Characters of an old or new value shown in a change line (the table shows all of it)."""


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= LONGEST else text[:LONGEST] + "…"


def _about(step: StepDoc) -> str:
    return f"step {step['id']} ({tool_cell(step)}): {step.get('description', '')}"


def plan_changes(old: PlanDoc, new: PlanDoc) -> list[Text]:
    """Return the changes from ``old`` to ``new``: goal, steps added, removed and changed."""
    lines: list[Text] = []
    if old.get("goal") != new.get("goal"):
        lines.append(styled(("~ goal: ", "yellow"), f"{old.get('goal')} → {new.get('goal')}"))
    before = {s["id"]: s for s in old.get("steps", [])}
    after = {s["id"]: s for s in new.get("steps", [])}
    for sid, step in after.items():
        was = before.get(sid)
        if was is None:
            lines.append(styled(("+ ", "green"), _about(step)))
            continue
        for field in FIELDS:
            then, now = was.get(field), step.get(field)
            if then != now:
                change = f"step {sid} {field}: {_shown(then)} → {_shown(now)}"
                lines.append(styled(("~ ", "yellow"), change))
    for sid, step in before.items():
        if sid not in after:
            lines.append(styled(("- ", "red"), _about(step)))
    return lines


def same_plan(a: PlanDoc | None, b: PlanDoc | None) -> bool:
    """Say whether two plans have the same goal and steps (what an approval's digest covers)."""
    if a is None or b is None:
        return a is b
    return bool(a.get("goal") == b.get("goal") and a.get("steps") == b.get("steps"))
