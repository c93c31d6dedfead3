"""One run watched at the terminal: live status, progress lines, plans shown, approvals asked."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from contextlib import nullcontext, redirect_stdout

from rich.console import Console

from planexec.cli.activity import Activity
from planexec.cli.board import PlanBoard
from planexec.cli.progress import Progress
from planexec.cli.review import Interrupted, Reviewer
from planexec.cli.screen import PromptLine
from planexec.context import Context
from planexec.errors import ConfigurationError
from planexec.runs import RunResult, StepEvent


def planner_problem(context: Context) -> str | None:
    """Say why the run's planner model cannot be made (e.g. no API key), if it cannot.

    Building the model reads its settings; nothing is sent anywhere.
    """
    from planexec.llm.models import provider_model

    try:
        provider_model(context.planner_model)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Watch:
    """The screen of one run: what it prints while it streams, and who answers approvals."""

    def __init__(
        self,
        out: Console,
        thread_id: str,
        *,
        yes: bool,
        judge: bool,
        as_json: bool,
        planner_missing: str | None,
    ) -> None:
        """Print on ``out``; ``planner_missing``: why no plan can be revised (no reject)."""
        self.thread_id, self.as_json = thread_id, as_json
        self.activity, self.board = Activity(out), PlanBoard(out)
        screen = PromptLine(out)  # one prompt, and the lines printed while it waits
        self.shown = Progress(out, self.activity, self.board, judge=judge, screen=screen)
        self.reviewer = Reviewer(
            out, self.board, self.activity, yes=yes, thread_id=thread_id,
            no_revision=f"revising a plan needs a planner model ({planner_missing})"
            if planner_missing else None, screen=screen, loop=_running_loop(),
        )  # fmt: skip

    def progress(self, event: StepEvent) -> None:
        """Show one event of the run; an accepted approval confirms the reviewer's answer."""
        if event.get("event") == "plan_approved":
            self.reviewer.accepted(event.get("approver"))
        self.shown(event)

    async def run(self, started: Awaitable[RunResult]) -> RunResult:
        """Await a run of the runs API; Ctrl-C stops it and says how to continue."""
        try:
            # with --json, stdout carries only the result: whatever tools print goes to stderr
            with redirect_stdout(sys.stderr) if self.as_json else nullcontext():
                return await started
        except asyncio.CancelledError:
            raise Interrupted(
                "interrupted; the run stopped where its last checkpoint is. Continue it with: "
                f"planexec resume {self.thread_id}"
            ) from None
        finally:
            self.activity.stop()
