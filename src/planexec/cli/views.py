"""Rich views of saved runs: one thread (``planexec show``) and the thread list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.box import SIMPLE_HEAD
from rich.console import Console
from rich.table import Table
from rich.text import Text

from planexec.cli.caller import who
from planexec.cli.outcome import print_answer, usage_line
from planexec.cli.render import print_plan
from planexec.cli.ui import one_line, styled, visible
from planexec.runs import ThreadState, ThreadSummary, redact
from planexec.state import StepRecord


def cut(text: str) -> Text:
    """Return a table cell of one line that ends in ``…`` where the terminal ends."""
    return Text(visible(text), no_wrap=True, overflow="ellipsis")


def step_table(records: Mapping[str, StepRecord]) -> Table:
    """Return the steps' statuses, attempts, timings and summaries (or errors).

    A step served from a recording shows ``(replayed)`` after its status; one whose result
    was made while its plan was reviewed, and kept by the approval, ``(kept from review)``.
    """
    timings = Table(title="steps", title_justify="left")
    for column in ("id", "status", "attempts", "seconds"):
        timings.add_column(column, no_wrap=True)
    timings.add_column("summary / error")
    for sid, rec in records.items():
        ended, started = rec.get("ended_at"), rec.get("started_at")
        took = ended - started if ended and started else None
        timings.add_row(
            str(sid),
            str(rec.get("status", ""))
            + (" (replayed)" if rec.get("replayed") else "")
            + (" (kept from review)" if rec.get("speculative") else ""),
            str(rec.get("attempts", 0)),
            f"{took:.2f}" if took is not None else "-",
            cut(one_line(rec.get("error") or rec.get("summary", ""))),
        )
    return timings


def decision_table(decisions: list[Mapping[str, Any]]) -> Table:
    """Return a thread's decision records: when, who, what, on which plan, and why.

    The plan is its version and the start of its digest (``v1 · 3f2a9c1b``); an edit shows
    the revision it made (``v1 → v2 · …``), an answer to a failed step the step.
    """
    table = Table(title="decisions", title_justify="left")
    for column in ("when (UTC)", "who", "action", "plan"):
        table.add_column(column, no_wrap=True)
    table.add_column("feedback / reason")
    for record in decisions:
        at = str(record.get("at") or "")[:19].replace("T", " ")
        action = str(record.get("action", ""))
        if record.get("kind") == "step_failure" and record.get("step") is not None:
            action += f" (step {record['step']})"
        table.add_row(
            at or "-",
            who(record.get("by")),
            action,
            plan_cell(record),
            cut(one_line(record.get("feedback") or "")),
        )
    return table


def plan_cell(record: Mapping[str, Any]) -> str:
    """Return the plan a decision applied to: ``v1 · 3f2a9c1b`` (``v1 → v2 · …`` for an edit)."""
    version, digest = record.get("version"), str(record.get("digest") or "")[:8]
    edited = record.get("edited")
    if isinstance(edited, Mapping):
        version = f"{version} → v{edited.get('version')}"
        digest = str(edited.get("digest") or "")[:8]
    shown = f"v{version}" if version is not None else "-"
    return f"{shown} · {digest}" if digest else shown


def print_thread(out: Console, thread: ThreadState) -> None:
    """Print a run: plan, steps, revisions, model use, and its end (status, answer, files)."""
    values: dict[str, Any] = thread.values
    waiting = ", ".join(thread.next) or "done"
    out.print(
        styled((str(values.get("task")), "bold"), f" · thread {thread.thread_id} · next: {waiting}")
    )
    if values.get("plan"):
        print_plan(out, values["plan"], values.get("steps", {}))
        out.print(step_table(values.get("steps", {})))
    for sid, early in (values.get("speculated") or {}).items():  # the plan awaits approval
        record = early.get("record") or {}
        said = one_line(record.get("error") or record.get("summary", ""))
        out.print(
            styled((f"step {sid} ran before approval (not approved yet)", "cyan"),
                   f": {record.get('status')}: {said}"),
            soft_wrap=False, no_wrap=True, overflow="ellipsis",
        )  # fmt: skip
    for rev in values.get("revisions", []):
        out.print(f"revision v{rev.get('version')}: {rev.get('reason')}")
    if values.get("decisions"):
        out.print(decision_table(values["decisions"]))
    out.print(f"model use: {usage_line(values.get('usage') or {})}")
    early_use = usage_line(values.get("speculation_usage") or {})
    if early_use != usage_line({}):  # steps run by a model while the plan was reviewed
        out.print(f"model use before approval: {early_use}")
    final = values.get("final")
    if final:
        status = str(final.get("status"))
        out.print(styled(("\n" + status, "bold green" if status == "succeeded" else "bold red")))
        print_answer(out, values, thread.workspace or "")


TASK_ROOM = 16
"""Columns the thread list keeps for the task before it wraps a long status at its spaces."""


def threads_table(rows: list[ThreadSummary], db: str, width: int | None = None) -> Table:
    """Return the recent runs of a database as a table (its password hidden, ids whole).

    On a terminal of ``width`` columns too narrow for the task, a long status
    (``waiting: approval``) takes two lines rather than leave the task a few letters.
    """
    # no frame, minutes not seconds: an 80-column terminal keeps room for the task
    table = Table(
        title=f"recent runs in {redact(db)}",
        title_justify="left",
        box=SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    statuses = [visible(str(row["status"])) for row in rows]
    longest = max(map(len, statuses), default=0)
    fixed = 36 + 16 + 3 * 2  # the thread id, the time, the gaps between the columns
    narrow = width is not None and fixed + longest + TASK_ROOM > width
    words = [len(word) for status in statuses for word in status.split()]
    table.add_column("thread", no_wrap=True, min_width=36)
    table.add_column("updated", no_wrap=True)
    shortest = max([9, *words])  # a status word is never cut: what state a run is in matters
    table.add_column("status", min_width=shortest, max_width=shortest if narrow else None)
    table.add_column("task")
    for row, status in zip(rows, statuses, strict=True):
        updated = str(row["updated"])[:16].replace("T", " ")
        table.add_row(row["thread_id"], updated, status, cut(one_line(row["task"])))
    return table
