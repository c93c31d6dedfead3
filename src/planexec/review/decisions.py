"""A reviewer's answer read into planexec's decision type: answer formats are told apart here.

planexec's own format (``Command(resume=...)``)::

    {"action": "approve", "digest": "…"}             # or "version": N, or neither
    {"action": "edit", "plan": {"goal": ..., "steps": [...]}}   # the shown plan, changed
    {"action": "reject", "feedback": "what to change"}
    {"action": "cancel", "reason": "…"}

The same as JSON text, or a bare action (``"approve"``), is accepted too. Another answer
format (a UI's own) is translated in :func:`planexec_answer`, so that every other module sees
only :data:`ReviewDecision`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Annotated, Any, Literal

from langchain.agents.middleware.human_in_the_loop import HITLResponse
from langgraph.prebuilt.interrupt import HumanResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planexec.review import hitl


class _Answer(BaseModel):
    """Fields every answer may carry: the plan it is about (checked against the one shown)."""

    model_config = ConfigDict(extra="forbid")

    version: int | None = Field(default=None, description="Version of the plan answered.")
    digest: str | None = Field(default=None, description="Digest of the plan answered.")


class Approve(_Answer):
    """Run the plan as it is."""

    action: Literal["approve"]


class Edit(_Answer):
    """Run this plan instead (validated like a planner's plan)."""

    action: Literal["edit"]
    plan: dict[str, Any]


class Reject(_Answer):
    """Send the plan back to the planner with feedback."""

    action: Literal["reject"]
    feedback: str = Field(
        pattern=r"\S", max_length=20_000, description="What to change (not only blanks)."
    )


class Cancel(_Answer):
    """Stop the run without executing anything."""

    action: Literal["cancel"]
    reason: str = ""


ReviewDecision = Annotated[Approve | Edit | Reject | Cancel, Field(discriminator="action")]
_decision = TypeAdapter(ReviewDecision)
SHAPES = (
    '{"action": "approve", "digest": "..."} | {"action": "edit", "plan": {...}} | '
    '{"action": "reject", "feedback": "..."} | {"action": "cancel"}'
)


@cache
def response_schema() -> dict[str, Any]:
    """Return the JSON schema of every accepted answer, published with the interrupt.

    planexec's own decisions, LangChain v1's ``HITLResponse`` and the legacy Agent Inbox's
    ``[HumanResponse]``: published for clients, not enforced by LangGraph, so an answer outside
    it is refused by :func:`read_decision` with a reason and asked again.
    """
    answers = ReviewDecision | HITLResponse | list[HumanResponse]
    return TypeAdapter(answers).json_schema()


class AnswerRefused(ValueError):
    """A reviewer's answer cannot be accepted; the message says why."""


def planexec_answer(answer: Any) -> Any:
    """Translate an answer in any accepted format into planexec's own (not yet validated).

    JSON text is decoded; any other text names the action (``"approve"``). A LangChain v1
    HITL or legacy Agent Inbox answer is read by :func:`planexec.review.hitl.planexec_answer`.
    """
    if isinstance(answer, str):
        try:
            json.loads(answer)
        except (ValueError, RecursionError):  # not JSON (or unreadable JSON): an action name
            return {"action": answer.strip().lower()}
        answer = hitl.json_text(answer, "the answer's JSON text")
    return hitl.planexec_answer(answer)


def parse_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; raise pydantic's ValidationError if it is not a decision."""
    return _decision.validate_python(planexec_answer(answer))


def read_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; raise :class:`AnswerRefused` saying why it is not a decision."""
    try:
        return parse_decision(answer)
    except hitl.HitlAnswerError as exc:
        raise AnswerRefused(f"answer not understood ({exc})") from None
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise AnswerRefused(f"answer not understood ({details}); expected {SHAPES}") from None
    except (ValueError, TypeError, LookupError, AttributeError, RecursionError) as exc:
        # the last guard of "no answer wedges a thread": an answer that trips the reading
        # itself is refused like any other, never raised from the approval node
        raise AnswerRefused(f"answer not understood ({type(exc).__name__})") from None
