"""The interactive plan review: approve, edit (in $EDITOR), reject with feedback, or cancel."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt

from planexec.cli.render import print_plan
from planexec.errors import PlanexecError
from planexec.runs import ApprovalRequest
from planexec.state import PlanDoc

CHOICES = ["approve", "edit", "reject", "cancel"]


class Paused(PlanexecError):
    """Nobody answered the approval prompt; the run waits in its thread."""


class Reviewer:
    """Answers approval requests at the terminal, or approves them all with ``--yes``."""

    def __init__(self, out: Console, *, yes: bool, thread_id: str) -> None:
        """Ask on ``out``; ``yes`` approves without asking."""
        self.out, self.yes, self.thread_id = out, yes, thread_id

    def __call__(self, request: ApprovalRequest) -> dict[str, Any]:
        """Show the plan and what is wrong with it; return the reviewer's answer."""
        print_plan(self.out, request["plan"])
        if request.get("error"):
            self.out.print(f"[red]refused:[/] {escape(str(request['error']))}")
        for problem in request.get("problems") or []:
            self.out.print(f"[red]invalid:[/] {escape(str(problem))}")
        if request.get("side_effect_tools"):
            tools = ", ".join(map(str, request["side_effect_tools"]))
            self.out.print("tools that write or send: " + escape(tools))
        names = {"version": request["version"], "digest": request["digest"]}
        if self.yes:
            self.out.print("[green]approved[/] (--yes)")
            return {"action": "approve", **names}
        try:
            return {**self.ask(request["plan"]), **names}  # an answer names its plan
        except EOFError:
            raise Paused(
                f"no answer on stdin; the run is paused. Continue it with: "
                f"planexec resume {self.thread_id}"
            ) from None

    def ask(self, plan: PlanDoc) -> dict[str, Any]:
        """Prompt until the reviewer gives a complete answer."""
        while True:
            choice = Prompt.ask(
                "approve, edit, reject or cancel?",
                console=self.out,
                choices=CHOICES,
                default="approve",
            )
            if choice == "approve":
                return {"action": "approve"}
            if choice == "cancel":
                return {"action": "cancel", "reason": "cancelled at the prompt"}
            if choice == "reject":
                feedback = Prompt.ask("what should change?", console=self.out).strip()
                if feedback:
                    return {"action": "reject", "feedback": feedback}
                continue
            edited = edit_in_editor(plan)
            if edited is None:
                self.out.print("[red]the edited file is not valid JSON[/]; asking again")
                continue
            return {"action": "edit", "plan": edited}


def edit_in_editor(plan: PlanDoc) -> dict[str, Any] | None:
    """Open $VISUAL/$EDITOR on the plan's JSON; return what was saved (None if it is not JSON)."""
    text = json.dumps({"goal": plan["goal"], "steps": plan["steps"]}, indent=2)
    edited = click.edit(text, extension=".json", require_save=False)
    try:
        loaded = json.loads(edited if edited is not None else text)
    except json.JSONDecodeError:
        return None
    return loaded if isinstance(loaded, dict) else None
