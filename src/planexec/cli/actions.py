"""What the commands do, on the runs API: start, resume, show and list runs."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planexec.cli.guard import EXIT_FAILED
from planexec.cli.render import Progress, console, print_outcome
from planexec.cli.review import Reviewer
from planexec.cli.views import print_thread, threads_table
from planexec.context import Context
from planexec.errors import PlanexecError
from planexec.outputs import OutputStore, output_of
from planexec.runs import RunRequest, Runs, ThreadState, new_run, redact, sandbox_for
from planexec.sandbox import default_outputs_dir


class UserError(PlanexecError):
    """A mistake the user can fix; printed as one line."""


class Session:
    """One invocation's choices: approve everything (--yes), print JSON on stdout (--json)."""

    def __init__(self, *, yes: bool = False, as_json: bool = False) -> None:
        """Send the lines for people to stderr when stdout carries JSON."""
        self.yes, self.as_json = yes, as_json
        self.out = console(stderr=as_json)


@dataclass(frozen=True)
class NewRun:
    """The ``run`` command's arguments."""

    task: str | None
    plan_file: Path | None
    data: list[Path]
    thread_id: str
    folder: str | None
    context: Context


async def start(new: NewRun, db: str, session: Session) -> int:
    """Check and start a run, printing progress; return the exit code."""
    folder = new.folder if new.folder is not None else Path("planexec-runs") / new.thread_id
    if not new.task and new.plan_file is None:
        raise UserError("give a TASK, or --plan with a plan file")
    request = new_run(
        new.task, plan=new.plan_file, workspace=folder, data=new.data,
        thread_id=new.thread_id, context=new.context, db=db,
    )  # fmt: skip
    out = session.out
    out.print(f"thread {request.thread_id} · workspace {_root(request)}")
    progress, reviewer = Progress(out), Reviewer(out, yes=session.yes, thread_id=new.thread_id)
    async with Runs.aopen(db) as runs:
        # with --json, stdout carries only the result: whatever tools print goes to stderr
        with redirect_stdout(sys.stderr) if session.as_json else nullcontext():
            result = await runs.astart(request, on_event=progress, decide=reviewer)
    return report(result.values, result.thread_id, _root(request), session)


async def resume(thread_id: str, db: str, session: Session) -> int:
    """Continue a paused or interrupted run; return the exit code."""
    out = session.out
    async with Runs.aopen(db) as runs:
        thread = _exists(await runs.aget(thread_id), thread_id, db)
        if not thread.workspace:
            raise UserError(f"thread {thread_id} was not started by the planexec CLI")
        sandbox = sandbox_for(thread.workspace, db, thread.outputs)
        if thread.finished:
            out.print(f"thread {thread_id} has already finished")
            return report(thread.values, thread_id, str(sandbox.root), session)
        progress, reviewer = Progress(out), Reviewer(out, yes=session.yes, thread_id=thread_id)
        with redirect_stdout(sys.stderr) if session.as_json else nullcontext():
            result = await runs.aresume(thread_id, on_event=progress, decide=reviewer)
    return report(result.values, thread_id, str(sandbox.root), session)


async def show(thread_id: str, db: str, session: Session, step: int | None = None) -> int:
    """Print a run (or one step's whole output as JSON); return the exit code."""
    async with Runs.aopen(db) as runs:
        thread = _exists(await runs.aget(thread_id), thread_id, db)
    if step is not None:
        record = thread.values.get("steps", {}).get(str(step))
        if record is None:
            raise UserError(f"run {thread_id} has no step {step}")
        output = output_of(record, OutputStore(thread.outputs or default_outputs_dir()))
        print(json.dumps(output, ensure_ascii=False, indent=1))
    elif session.as_json:
        listing = {"thread_id": thread_id, "next": list(thread.next), **thread.values}
        print(json.dumps(listing, default=str, indent=1))
    else:
        print_thread(session.out, thread)
    return 0


async def threads(db: str, limit: int, session: Session) -> int:
    """List recent runs; return the exit code."""
    async with Runs.aopen(db) as runs:
        rows = await runs.athreads(limit)
    if session.as_json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        session.out.print(threads_table(rows, db))
    return 0


def report(values: dict[str, Any], thread_id: str, workspace: str, session: Session) -> int:
    """Print the outcome; return the exit code (0 only when every step succeeded)."""
    final = values.get("final") or {}
    status = final.get("status", "unfinished")
    if session.as_json:
        steps, usage = values.get("steps", {}), values.get("usage", {})
        result = {"thread_id": thread_id, "workspace": workspace, "final": final}
        print(json.dumps({**result, "steps": steps, "usage": usage}, default=str, indent=1))
    else:
        print_outcome(session.out, values, thread_id, workspace)
    return 0 if status == "succeeded" else EXIT_FAILED


def _root(request: RunRequest) -> str:
    return str(request.sandbox.root) if request.sandbox else ""


def _exists(thread: ThreadState | None, thread_id: str, db: str) -> ThreadState:
    if thread is None:
        raise UserError(f"no run with thread id {thread_id} in {redact(db)}")
    return thread
