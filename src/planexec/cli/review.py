"""The interactive plan review: approve, edit (in $EDITOR), reject with feedback, or cancel."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click
from rich.console import Console

from planexec.cli.activity import Activity
from planexec.cli.board import PlanBoard
from planexec.cli.caller import who
from planexec.cli.changes import same_plan
from planexec.cli.early import plan_view_lines
from planexec.cli.editor import edit_plan, plan_text
from planexec.cli.failure import answer_failure
from planexec.cli.keys import ctrl_c_for_the_editor, ctrl_c_raises
from planexec.cli.screen import PromptLine
from planexec.cli.ui import styled
from planexec.errors import PlanexecError
from planexec.review.estimate import estimate_lines
from planexec.review.request import ApprovalRequest, memory_lines, ran_lines
from planexec.runs import Caller, ReviewRequest

ANSWERS = {
    "approve": {"", "y", "yes", "a", "approve", "ok"},
    "edit": {"e", "edit"},
    "reject": {"r", "reject", "n", "no"},
    "cancel": {"c", "cancel", "q", "quit"},
}


ORIGINS = {
    "planner": "written by the planner",
    "replanner": "revised by the replanner after failures",
    "reviewer": "your edit",
    "state edit": "given as a plan, not planned",
    "memory": "adapted from an approved plan of a similar task",
}


class Paused(PlanexecError):
    """Nobody answered the approval prompt; the run waits in its thread."""


class Interrupted(PlanexecError):
    """The user pressed Ctrl-C; the run stopped where its last checkpoint is (exit 130)."""


def read_answer(text: str) -> str | None:
    """Return the action a typed answer means (None if it means none)."""
    word = text.strip().lower()
    for action, words in ANSWERS.items():
        if word in words:
            return action
    return None


class Reviewer:
    """Answers approval requests at the terminal, or approves them all with ``--yes``."""

    def __init__(
        self,
        out: Console,
        board: PlanBoard,
        activity: Activity,
        *,
        yes: bool,
        thread_id: str,
        no_revision: str | None = None,
        screen: PromptLine | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Ask on ``out``; ``no_revision`` says why no plan can be revised (no planner model).

        Then reject (at the approval) and replan (at a failed step) are not offered.
        ``screen`` keeps the prompt whole while lines arrive (the run goes on while a plan
        whose read-only steps run is reviewed: the question is asked in a thread); ``loop``
        (the run's, in the main thread) lets the editor alone take Ctrl-C from there too.
        """
        self.out, self.board, self.activity = out, board, activity
        self.screen, self.loop = screen or PromptLine(out), loop
        self.yes, self.thread_id, self.no_revision = yes, thread_id, no_revision
        self.draft: str | None = None  # the user's last edit, until the approval takes it
        self.approving = False  # --yes answered approve: said once the approval accepts it
        self.waited = 0.0
        """Seconds spent waiting for the user's answers (the end summary tells them apart)."""

    def __call__(self, request: ReviewRequest) -> dict[str, Any]:
        """Show the plan and what is wrong with it; return the reviewer's answer.

        Ctrl-C raises at once from the first line shown (:func:`ctrl_c_raises`), not only
        once the prompt waits: a plan takes a while to print on a slow terminal.
        """
        asked = time.monotonic()
        try:
            with ctrl_c_raises():
                return self.answer(request)
        finally:
            self.waited += time.monotonic() - asked

    def answer(self, request: ReviewRequest) -> dict[str, Any]:
        """Return the reviewer's answer to ``request`` (see :meth:`__call__`)."""
        self.activity.stop()
        if request["type"] == "step_failure":  # a step whose plan says on_failure: "ask"
            try:
                failed = dict(request)
                return answer_failure(self.out, failed, yes=self.yes, no_revision=self.no_revision)
            except EOFError:
                raise Paused(
                    f"no answer on stdin; the run is paused. Continue it with: "
                    f"planexec resume {self.thread_id}"
                ) from None
        names = {"version": request["version"], "digest": request["digest"]}
        error, draft, self.draft, self.approving = request.get("error"), self.draft, None, False
        try:
            if error and draft is not None:  # the approval refused the user's edit
                self.out.print(styled(("your edit was refused: ", "red"), str(error)))
                answer = self.edit(draft, str(error))
                if answer is not None:
                    return {**answer, **names}
            self.show(request)
            if self.yes and request.get("problems"):  # approving it would only be refused
                raise Paused(
                    f"plan v{request['version']} is invalid with the tools of this run, so --yes "
                    "cannot approve it; it waits for approval. Continue with: planexec resume "
                    f"{self.thread_id} (with the --mcp and --tools its tools come from)"
                )
            if self.yes:
                self.approving = True
                return {"action": "approve", **names}
            return {**self.ask(request), **names}  # an answer names its plan
        except EOFError:
            raise Paused(
                f"no answer on stdin; the run is paused. Continue it with: "
                f"planexec resume {self.thread_id}"
            ) from None
        except KeyboardInterrupt:
            ran = request["version"] != 1 or request.get("already_ran")
            nothing = "" if ran else " nothing was run;"
            raise Interrupted(
                f"interrupted;{nothing} plan v{request['version']} waits for your approval. "
                f"Continue with: planexec resume {self.thread_id}"
            ) from None

    def accepted(self, approver: Caller | None = None) -> None:
        """Say who approved the plan, once the approval accepted it (and only then).

        ``approver``: who the approval recorded (``approved by alice (cli)``); ``--yes`` says
        so too (``approved (--yes) by alice (cli)``).
        """
        yes, self.approving = self.approving, False
        if yes or approver is not None:
            by = f" by {who(approver)}" if approver is not None else ""
            self.out.print(styled(("approved", "green"), f"{' (--yes)' if yes else ''}{by}"))

    def show(self, request: ApprovalRequest) -> None:
        """Print the plan (unless shown just before), its problems and side-effecting tools."""
        plan = request["plan"]
        origin = str(request.get("origin") or "planner")
        heading = f"for your approval ({ORIGINS.get(origin, origin)}):"
        self.board.show(plan, heading)
        if request.get("error"):
            self.out.print(styled(("refused: ", "red"), str(request["error"])))
        for problem in request.get("problems") or []:
            self.out.print(styled(("invalid: ", "red"), str(problem)))
        if request.get("side_effect_tools"):
            notes = request.get("side_effect_notes") or {}
            tools = ", ".join(
                f"{t} ({notes[t]})" if t in notes else str(t) for t in request["side_effect_tools"]
            )
            self.out.print(styled("tools that write or send: ", tools))
        for sid, shape in (request.get("produces") or {}).items():
            self.out.print(styled((f"step {sid} produces ", "dim"), str(shape)))
        for line in [*memory_lines(request.get("memory")), *ran_lines(request.get("already_ran"))]:
            self.out.print(line)
        for early in plan_view_lines(request):
            self.out.print(early, soft_wrap=False, no_wrap=True, overflow="ellipsis")
        found = request.get("estimate")
        if found:
            for line in estimate_lines(found):
                self.out.print(line)

    def ask(self, request: ApprovalRequest) -> dict[str, Any]:
        """Prompt until the reviewer gives a complete answer."""
        menu = "y = approve · e = edit · r = reject with feedback · c = cancel"
        if self.no_revision:
            self.out.print(
                styled(("note: ", "yellow"), f"reject is not offered: {self.no_revision}")
            )
            menu = "y = approve · e = edit · c = cancel"
        said_no = False  # once the reviewer said no (r, n), an empty answer approves nothing
        while True:
            default = "" if said_no else " [y]"
            typed = self.screen.input(styled(("Run this plan? ", "bold"), f"{menu}{default}: "))
            action = read_answer(typed)
            said_no = said_no or action == "reject"
            if action == "approve" and said_no and not typed.strip():
                self.out.print(styled(("please answer ", "yellow"), menu))
            elif action == "reject" and self.no_revision:  # not offered: neither cancel nor run
                self.out.print(
                    styled(("note: ", "yellow"), f"reject is not offered: {self.no_revision}")
                )
                self.out.print(styled(("please answer ", "yellow"), menu))
            elif action in {"approve", "cancel"}:
                reason = {"reason": "cancelled at the prompt"} if action == "cancel" else {}
                return {"action": action, **reason}
            elif action == "reject":
                feedback = self.screen.input("what should change? (empty: back) ").strip()
                if feedback:
                    return {"action": "reject", "feedback": feedback}
            elif action == "edit":
                plan = request["plan"]
                answer = self.edit(plan_text(plan), None)
                if answer is not None and same_plan(answer["plan"], plan):  # not an approval
                    self.out.print(styled(("the plan is unchanged; back to the menu", "yellow")))
                elif answer is not None:
                    return answer
            else:
                self.out.print(styled(("please answer ", "yellow"), menu))

    def edit(self, text: str, error: str | None) -> dict[str, Any] | None:
        """Edit ``text`` in the editor; return the edit answer (None: back to the menu)."""
        try:
            with ctrl_c_for_the_editor(self.loop):
                edited, self.draft, unsolved = edit_plan(text, error)
        except click.ClickException as exc:  # the editor could not start, or failed
            self.out.print(styled(("the editor failed: ", "red"), exc.format_message()))
            return None
        if edited is None:
            if unsolved:
                self.out.print(styled(("the edit is not used: ", "red"), unsolved))
            self.draft = None
            return None
        return {"action": "edit", "plan": edited}
