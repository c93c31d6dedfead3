"""Rich views of saved runs: one thread (``planexec show``) and the thread list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planexec.cli.render import print_plan
from planexec.runs import ThreadState, ThreadSummary, redact
from planexec.state import StepRecord


def step_table(records: Mapping[str, StepRecord]) -> Table:
    """Return the steps' statuses, attempts, timings and summaries (or errors)."""
    timings = Table(title="steps", title_justify="left")
    for column in ("id", "status", "attempts", "seconds", "summary / error"):
        timings.add_column(column, overflow="fold")
    for sid, rec in records.items():
        ended, started = rec.get("ended_at"), rec.get("started_at")
        took = ended - started if ended and started else None
        timings.add_row(
            sid,
            rec.get("status", ""),
            str(rec.get("attempts", 0)),
            f"{took:.2f}" if took is not None else "-",
            escape((rec.get("error") or rec.get("summary", ""))[:120]),
        )
    return timings


def print_thread(out: Console, thread: ThreadState) -> None:
    """Print a run: its plan, step table, revisions, token use and final status."""
    values: dict[str, Any] = thread.values
    out.print(
        f"[bold]{escape(str(values.get('task')))}[/] · thread {thread.thread_id} · "
        f"next: {', '.join(thread.next) or 'done'}"
    )
    if values.get("plan"):
        print_plan(out, values["plan"], values.get("steps", {}))
        out.print(step_table(values.get("steps", {})))
    for rev in values.get("revisions", []):
        out.print(f"revision v{rev['version']}: {escape(rev['reason'])}")
    for role, use in values.get("usage", {}).items():
        out.print(
            f"{role}: {use['calls']} calls, {use['input_tokens']} prompt tokens, "
            f"{use['output_tokens']} completion tokens"
        )
    if values.get("final"):
        out.print(f"final: {values['final']['status']}")


def threads_table(rows: list[ThreadSummary], db: str) -> Table:
    """Return the recent runs of a database as a table (its password hidden)."""
    table = Table(title=f"recent runs in {escape(redact(db))}", title_justify="left")
    for column in ("thread", "updated", "status", "task"):
        table.add_column(column, overflow="fold")
    for row in rows:
        status, task = escape(row["status"]), escape(row["task"][:80])
        table.add_row(row["thread_id"], str(row["updated"])[:19], status, task)
    return table
