"""A plan as people read it: its steps, and the order they run in (each step once).

Steps are a table, or one block each on a narrow terminal.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from graphlib import CycleError, TopologicalSorter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from planexec.cli.ui import styled
from planexec.state import PlanDoc, StepDoc, StepRecord

STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "succeeded": "green",
    "failed": "red",
    "skipped": "magenta",
}
NARROW = 80
"""Below this many columns a plan is shown step by step: a table would break every word."""


def tool_cell(step: StepDoc) -> str:
    """Return the plan table's tool cell: the step's tool, or the tools its model may call."""
    if step.get("tool"):
        return str(step["tool"])
    listed = step.get("tools") or []
    return f"(model: {', '.join(map(str, listed))})" if listed else "(model, no tools)"


def id_ranges(ids: Iterable[int]) -> str:
    """Return step ids as short text: ``[1, 2, 3, 5]`` is ``1-3, 5`` (``-`` for none)."""
    runs: list[list[int]] = []
    for sid in sorted(set(ids)):
        if runs and sid == runs[-1][-1] + 1:
            runs[-1].append(sid)
        else:
            runs.append([sid])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) or "-"


def plan_table(plan: PlanDoc, records: Mapping[str, StepRecord] | None = None) -> Table:
    """Return a plan as a table: every field the approval's digest covers.

    With ``records`` (a run's step records) it also shows each step's status.
    """
    columns = ("id", "tool", "args", "description", "after", "status")
    title = f"Plan v{plan.get('version', '?')}: {plan.get('goal', '')}"
    table = Table(title=title, title_justify="left")
    for column in columns if records is not None else columns[:-1]:
        table.add_column(column, overflow="fold")
    for step in plan.get("steps", []):
        status = str((records or {}).get(str(step["id"]), {}).get("status", "pending"))
        expected = step.get("expected_output") or ""
        cells = (
            str(step["id"]),
            tool_cell(step),
            json.dumps(step.get("args", {}), ensure_ascii=False, default=str),
            str(step.get("description", "")) + (f" → {expected}" if expected else ""),
            id_ranges(step.get("depends_on", [])),
            styled((status, STATUS_STYLE.get(status, ""))),
        )
        table.add_row(*cells[: len(table.columns)])
    return table


def plan_blocks(plan: PlanDoc, records: Mapping[str, StepRecord] | None = None) -> Text:
    """Return a plan as one block per step (tool, what it waits for, args, description)."""
    lines = styled(f"Plan v{plan.get('version', '?')}: {plan.get('goal', '')}")
    for step in plan.get("steps", []):
        lines.append_text(styled(("\n" + f"{step['id']}. {tool_cell(step)}", "bold")))
        if step.get("depends_on"):
            lines.append_text(styled((f" · after {id_ranges(step['depends_on'])}", "dim")))
        if records is not None:
            status = str(records.get(str(step["id"]), {}).get("status", "pending"))
            lines.append_text(styled(" · ", (status, STATUS_STYLE.get(status, ""))))
        args = json.dumps(step.get("args", {}), ensure_ascii=False, default=str)
        expected = step.get("expected_output") or ""
        about = str(step.get("description", "")) + (f" → {expected}" if expected else "")
        lines.append_text(styled("\n" + textwrap.indent(f"args: {args}\n{about}", "   ")))
    return lines


def levels(plan: PlanDoc) -> list[list[StepDoc]]:
    """Group steps by how soon they can start: a step comes one group after its last dependency.

    Linear in the plan's size. A plan with a cycle (only a hand-made state holds one) is
    listed one step per group, in plan order.
    """
    steps = plan.get("steps", [])
    known = {s["id"] for s in steps}
    graph = {s["id"]: [d for d in s.get("depends_on", []) if d in known] for s in steps}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError:
        return [[s] for s in steps]
    depth: dict[int, int] = {}
    for sid in order:
        depth[sid] = 1 + max((depth[d] for d in graph[sid]), default=-1)
    grouped: list[list[StepDoc]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for step in steps:
        grouped[depth[step["id"]]].append(step)
    return grouped


def run_order(plan: PlanDoc) -> Text:
    """Return the order steps run in: one line per group, each step once with what it waits for."""
    lines = Text("runs in this order (steps on one line can run at the same time):")
    for number, group in enumerate(levels(plan), 1):
        lines.append(f"\n  {number:>2}. ")
        for index, step in enumerate(group):
            lines.append(" · " if index else "")
            lines.append(f"step {step['id']}", "bold")
            if step.get("depends_on"):
                lines.append(f" after {id_ranges(step['depends_on'])}", "dim")
    return lines


def print_plan(
    out: Console, plan: PlanDoc, records: Mapping[str, StepRecord] | None = None
) -> None:
    """Print a plan (a table, or blocks when the terminal is narrow) and the order it runs in."""
    narrow = out.width < NARROW
    out.print(plan_blocks(plan, records) if narrow else plan_table(plan, records))
    out.print(run_order(plan))
