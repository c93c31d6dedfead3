"""The question about a failed step (``on_failure: "ask"``): its payload and its answers.

The payload carries planexec's own keys and the ecosystem's HITL requests (one action,
:data:`ACTION`, whose args are the step's arguments), so Agent Chat UI and Studio show it; a
HITL answer is read into planexec's own (:func:`from_hitl`).
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired

from planexec.review import hitl
from planexec.review.describe import escaped
from planexec.review.hitl import HitlFields
from planexec.state import StepDoc

MAX_HINT_CHARS = 2_000
ANSWERS = (
    'Answer {"action": "retry" | "skip" | "replan" | "cancel", "step": N}; a retry may carry '
    '"args" (the step\'s new arguments), a replan a "hint", a cancel a "reason".'
)


ACTION = "retry_failed_step"
"""The action the HITL request asks about: retry the step (its args are the step's args)."""
HITL_ANSWERS = (
    "Approve: retry the step as it is. Edit its args: retry with them. Reject with a message: "
    "replan, the message a hint for the replanner (the message skip: go on without the step). "
    "Reject without a message: cancel the run."
)


class FailureRequest(HitlFields):
    """The interrupt's payload (JSON): the failed step and what may be answered.

    It is also a LangChain v1 HITL request and a legacy Agent Inbox interrupt, so Agent Chat
    UI and Studio show it: one action, :data:`ACTION`, whose args are the step's arguments.
    """

    type: Literal["step_failure"]
    step: StepDoc
    error: str
    inputs: dict[str, str]
    """What each step it depends on produced (summaries)."""
    version: int
    digest: str
    asked: int
    """How many times this step's failure has been asked about, this time included."""
    refused: str | None
    """Why the previous answer was refused, when this asks again."""
    answers: str
    asked_at: NotRequired[str]
    """When this question was first asked (ISO-8601 UTC)."""
    expires_at: NotRequired[str | None]
    """When an answer stops being taken (``approval_expires_after``); None: never."""


class Refused(ValueError):
    """An answer that cannot be taken; the message says why."""


def describe_failure(step: StepDoc, error: str) -> str:
    """Return the question in Markdown for chat UIs (the step's words as text, not markup)."""
    tool = step["tool"] or "model"
    return (
        f"**Step {step['id']} failed** ({escaped(tool, 60)}): {escaped(error, 500)}\n\n"
        f"Arguments: {escaped(json.dumps(step['args'], ensure_ascii=False), 300)}\n\n"
        + HITL_ANSWERS
    )


def from_hitl(answer: Any, sid: int) -> Any:
    """Read a v1 or legacy HITL answer into this node's own (others pass unchanged)."""
    try:
        read = hitl.from_hitl_format(answer, ACTION)
    except (ValueError, TypeError, LookupError, AttributeError, RecursionError) as exc:
        raise Refused(f"answer not understood ({exc})") from None
    if read is answer or not isinstance(read, dict):
        return answer
    kind = read.get("action")
    if kind == "approve":
        return {"action": "retry", "step": sid}
    if kind == "edit":
        edited = read.get("plan") or {}
        args = edited.get("args") if isinstance(edited, dict) else None
        if isinstance(args, str):  # Agent Chat UI sends an edited field as its text
            args = hitl.json_text(args, "the edited args")
        return {"action": "retry", "step": sid, "args": args}
    if kind == "reject" and str(read.get("feedback", "")).strip().lower() == "skip":
        return {"action": "skip", "step": sid}
    if kind == "reject":
        return {"action": "replan", "step": sid, "hint": read.get("feedback", "")}
    return {"action": "cancel", "step": sid, "reason": str(read.get("reason") or "")}
