"""The CLI's question about a failed step whose plan says ``on_failure: "ask"``."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from planexec.cli.keys import ask_line
from planexec.cli.ui import styled

MENU = "r = retry · e = retry with new arguments · s = skip · p = replan · c = cancel"
NO_REPLAN_MENU = "r = retry · e = retry with new arguments · s = skip · c = cancel"
WORDS = {
    "retry": {"r", "retry"},
    "edit": {"e", "edit"},
    "skip": {"s", "skip"},
    "replan": {"", "p", "replan"},
    "cancel": {"c", "cancel", "q", "quit"},
}


def answer_failure(
    out: Console, request: dict[str, Any], *, yes: bool, no_revision: str | None = None
) -> dict[str, Any]:
    """Show the failed step and its error; return the answer (``--yes``: replan, the default).

    ``no_revision`` says why no planner model can revise the plan: replanning is then not
    offered, and ``--yes`` ends the run instead (nothing could revise it).
    """
    step = request["step"]
    sid = step["id"]
    out.print(
        styled(("step failed: ", "red"), f"step {sid} ({step['tool'] or 'model'}): "),
        str(request.get("error") or ""),
    )
    out.print(styled("arguments: ", json.dumps(step["args"], ensure_ascii=False)))
    if request.get("refused"):
        out.print(styled(("refused: ", "red"), str(request["refused"])))
    if yes and no_revision:
        reason = f"step {sid} failed; no planner model is configured to revise the plan"
        out.print(styled(("ending the run", "yellow"), f" (--yes: {reason})"))
        return {"action": "cancel", "step": sid, "reason": reason}
    if yes:
        out.print(styled(("replanning", "yellow"), " (--yes: what a step without on_failure does)"))
        return {"action": "replan", "step": sid}
    menu, default = (NO_REPLAN_MENU, "") if no_revision else (MENU, " [p]")
    if no_revision:
        out.print(styled(("note: ", "yellow"), f"replan is not offered: {no_revision}"))
    while True:
        typed = ask_line(out, styled(("What now? ", "bold"), f"{menu}{default}: "))
        typed = typed.strip().lower()
        action = next((a for a, words in WORDS.items() if typed in words), None)
        if action == "replan" and no_revision:
            out.print(styled(("please answer ", "yellow"), menu))
            continue
        if action in ("retry", "skip"):
            return {"action": action, "step": sid}
        if action == "cancel":
            return {"action": "cancel", "step": sid, "reason": "cancelled at the prompt"}
        if action == "replan":
            hint = ask_line(out, "a hint for the replanner? (empty: none) ").strip()
            return {"action": "replan", "step": sid, "hint": hint}
        if action == "edit":
            text = ask_line(out, "new arguments (JSON, one line): ").strip()
            try:
                args = json.loads(text)
            except ValueError as exc:
                out.print(styled(("not JSON: ", "red"), str(exc)))
                continue
            return {"action": "retry", "step": sid, "args": args}
        out.print(styled(("please answer ", "yellow"), menu))
