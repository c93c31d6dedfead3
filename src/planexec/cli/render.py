"""Rich rendering of plans, step progress and run outcomes; every outside value is escaped."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from planexec.runs import StepEvent
from planexec.state import PlanDoc, StepDoc, StepRecord

STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "succeeded": "green",
    "failed": "red",
    "skipped": "magenta",
}


def console(*, stderr: bool = False) -> Console:
    """Return the console the CLI prints with (no highlighting, long lines kept whole)."""
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def tool_cell(step: StepDoc) -> str:
    """Return the plan table's tool cell: the step's tool, or the tools its model may call."""
    if step["tool"]:
        return escape(step["tool"])
    listed = step.get("tools") or []
    return escape(f"(model: {', '.join(listed)})" if listed else "(model, no tools)")


def plan_table(plan: PlanDoc, records: Mapping[str, StepRecord] | None = None) -> Table:
    """Return a plan as a table: every field the approval's digest covers, and step statuses."""
    records = records or {}
    table = Table(title=f"Plan v{plan['version']}: {escape(plan['goal'])}", title_justify="left")
    for column in ("id", "tool", "args", "description", "after", "status"):
        table.add_column(column, overflow="fold")
    for step in plan["steps"]:
        status = records.get(str(step["id"]), {}).get("status", "pending")
        expected = step.get("expected_output") or ""
        table.add_row(
            str(step["id"]),
            tool_cell(step),
            escape(json.dumps(step["args"], ensure_ascii=False)),
            escape(step["description"] + (f" → {expected}" if expected else "")),
            ", ".join(map(str, step["depends_on"])) or "-",
            f"[{STATUS_STYLE.get(status, '')}]{status}[/]",
        )
    return table


def dependency_tree(plan: PlanDoc) -> Tree:
    """Return a plan's dependency graph as a tree rooted at the steps that wait for nothing."""
    tree = Tree("dependencies")
    children: dict[int, list[int]] = {}
    for step in plan["steps"]:
        for dep in step["depends_on"]:
            children.setdefault(dep, []).append(step["id"])
    known = {s["id"] for s in plan["steps"]}

    def grow(node: Tree, sid: int, seen: frozenset[int]) -> None:
        for child in children.get(sid, []):
            if child not in seen:
                grow(node.add(f"step {child}"), child, seen | {child})

    for step in plan["steps"]:
        if not [d for d in step["depends_on"] if d in known]:
            grow(tree.add(f"step {step['id']}"), step["id"], frozenset({step["id"]}))
    return tree


def print_plan(
    out: Console, plan: PlanDoc, records: Mapping[str, StepRecord] | None = None
) -> None:
    """Print a plan as a table and its dependency graph as a tree."""
    out.print(plan_table(plan, records))
    out.print(dependency_tree(plan))


class Progress:
    """Prints one line per step event, with the time since the step started."""

    def __init__(self, out: Console) -> None:
        """Print to ``out``."""
        self.out = out
        self.started: dict[int | None, float] = {}

    def __call__(self, event: StepEvent) -> None:
        """Print the line of one step event (unknown events print nothing)."""
        sid, kind = event.get("step"), event.get("event")
        if kind == "step_started":
            self.started[sid] = time.monotonic()
            tool = escape(str(event.get("tool") or "model"))
            self.out.print(f"  [yellow]▶ step {sid}[/] running ({tool})")
            return
        elapsed = time.monotonic() - self.started.get(sid, time.monotonic())
        line = _event_line(kind, sid, elapsed, event)
        if line:
            self.out.print(line)


def _event_line(kind: object, sid: object, elapsed: float, event: StepEvent) -> str | None:
    if kind == "step_finished":
        summary = escape(str(event.get("summary", ""))[:100])
        return f"  [green]✔ step {sid}[/] done in {elapsed:.2f}s: {summary}"
    if kind == "step_failed":
        error = escape(str(event.get("error")))
        return f"  [red]✘ step {sid}[/] failed after {elapsed:.2f}s: {error}"
    if kind == "step_skipped":
        return f"  [magenta]↷ step {sid}[/] skipped: {escape(str(event.get('reason')))}"
    if kind == "step_retry":
        return f"  [yellow]↻ step {sid}[/] retrying after: {escape(str(event.get('error')))}"
    if kind == "tool_call_refused":
        tool = escape(str(event.get("tool")))
        return f"  [red]⊘ step {sid}[/] refused a call to {tool}: not a tool of this step"
    return None


def print_outcome(out: Console, values: Mapping[str, Any], thread_id: str, workspace: str) -> None:
    """Print a run's status, answer and artifacts for people."""
    final = values.get("final") or {}
    status = final.get("status", "unfinished")
    style = "green" if status == "succeeded" else "red"
    out.print(f"\n[{style}]{status}[/] · thread {thread_id}")
    if final.get("answer"):
        out.print(escape(final["answer"]))
    for artifact in final.get("artifacts", []):
        out.print(f"  → {escape(str(Path(workspace, artifact)))}")
