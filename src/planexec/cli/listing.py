"""What the reading commands do: show a run, list runs (and the session both kinds share)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from rich.console import Console

from planexec.cli.guard import Running, UserError
from planexec.cli.ui import console
from planexec.cli.views import print_thread, threads_table
from planexec.runs import Runs, ThreadState, default_db, redact
from planexec.storage.outputs import OutputStore, output_of
from planexec.tools.sandbox import default_outputs_dir


class Session:
    """One invocation's choices: approve everything (--yes), print JSON on stdout (--json)."""

    def __init__(self, *, yes: bool = False, as_json: bool = False) -> None:
        """Send the lines for people to stderr when stdout carries JSON."""
        self.yes, self.as_json = yes, as_json
        self.out: Console = console(stderr=as_json)
        self.running = Running()


def database(db: str | None) -> str:
    """Return the run database: ``--db``, else ``$PLANEXEC_DB``, else the user data dir."""
    return db or default_db()


def existing(thread: ThreadState | None, thread_id: str, db: str) -> ThreadState:
    """Return ``thread``, or say in one line that the database has no such run."""
    if thread is None:
        raise UserError(f"no run with thread id {thread_id} in {redact(db)}")
    return thread


def plain_json(value: Any) -> Any:
    """Return a JSON value for what a run's state holds beyond JSON (``json.dumps``' default).

    A chat message (any pydantic model) is its fields as a JSON object (``type``, ``content``,
    …, as ``model_dump(mode="json")`` gives them), anything else its text.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


async def show(thread_id: str, db: str, session: Session, step: int | None = None) -> int:
    """Print a run (or one step's whole output as JSON); return the exit code."""
    async with Runs.aopen(db) as runs:
        thread = existing(await runs.aget(thread_id), thread_id, db)
    if step is not None:
        record = thread.values.get("steps", {}).get(str(step))
        if record is None:
            raise UserError(f"run {thread_id} has no step {step}")
        output = output_of(record, OutputStore(thread.outputs or default_outputs_dir()))
        print(json.dumps(output, ensure_ascii=False, indent=1))  # noqa: T201 (the result)
    elif session.as_json:
        listing = {"thread_id": thread_id, "next": list(thread.next), **thread.values}
        listing.setdefault("decisions", [])  # who decided what: a list, empty before any answer
        print(json.dumps(listing, default=plain_json, indent=1))  # noqa: T201 (the result)
    else:
        print_thread(session.out, thread)
    return 0


async def threads(db: str, limit: int, session: Session) -> int:
    """List recent runs; return the exit code."""
    async with Runs.aopen(db) as runs:
        rows = await runs.athreads(limit)
    if session.as_json:
        print(json.dumps(rows, indent=1, default=str))  # noqa: T201 (the result)
    else:
        session.out.print(threads_table(rows, db, session.out.width))
    return 0
