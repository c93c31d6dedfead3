"""A reviewer's answer read into planexec's decision type: answer formats are told apart here.

planexec's own format (``Command(resume=...)``)::

    {"action": "approve", "digest": "…"}             # or "version": N, or neither
    {"action": "edit", "plan": {"goal": ..., "steps": [...]}}   # the shown plan, changed
    {"action": "reject", "feedback": "what to change"}
    {"action": "cancel", "reason": "…"}

The same as JSON text, or a bare action (``"approve"``), is accepted too. Another answer
format (a UI's own) is translated in :func:`normalized_answer`, so that every other module sees
only :data:`ReviewDecision`.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from typing import Annotated, Any, Literal

from langchain.agents.middleware.human_in_the_loop import HITLResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

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
    '{"action": "approve", "digest": "..."} (or "version": N, or neither; or just "approve") | '
    '{"action": "edit", "plan": {"goal": "...", "steps": [...]}} (the plan shown, changed) | '
    '{"action": "reject", "feedback": "what to change"} | '
    '{"action": "cancel", "reason": "..."} (reason optional)'
)
"""The answers planexec accepts, with their fields: shown with every refusal and in the request."""

ACTIONS = ("approve", "edit", "reject", "cancel")
FIELDS = {
    "approve": ("action", "digest", "version"),
    "edit": ("action", "plan", "digest", "version"),
    "reject": ("action", "feedback", "digest", "version"),
    "cancel": ("action", "reason", "digest", "version"),
}
WANTS = {
    "digest": "text (the digest shown with the plan)",
    "version": "a whole number (the version shown with the plan)",
    "plan": 'an object (the plan shown, changed: {"goal": "...", "steps": [...]})',
    "feedback": "text saying what to change",
    "reason": "text",
}
"""What each field of an answer holds, in the words a refusal uses."""


@cache
def response_schema() -> dict[str, Any]:
    """Return the JSON schema of every accepted answer, published with the interrupt.

    planexec's own decisions, LangChain v1's ``HITLResponse`` and the legacy Agent Inbox's
    ``[HumanResponse]``: published for clients, not enforced by LangGraph, so an answer outside
    it is refused by :func:`read_decision` with a reason and asked again.
    """
    answers = ReviewDecision | HITLResponse | list[hitl.HumanResponse]
    return TypeAdapter(answers).json_schema()


class AnswerRefused(ValueError):
    """A reviewer's answer cannot be accepted; the message says why."""


def normalized_answer(answer: Any) -> Any:
    """Translate an answer in any accepted format into planexec's own (not yet validated).

    JSON text is decoded; any other text names the action (``"approve"``). A LangChain v1
    HITL or legacy Agent Inbox answer is read by :func:`planexec.review.hitl.from_hitl_format`.
    """
    if isinstance(answer, str):
        try:
            json.loads(answer)
        except (ValueError, RecursionError):  # not JSON (or unreadable JSON): an action name
            return {"action": answer.strip().lower()}
        answer = hitl.json_text(answer, "the answer's JSON text")
    return hitl.from_hitl_format(answer)


def parse_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; raise pydantic's ValidationError if it is not a decision."""
    return _decision.validate_python(normalized_answer(answer))


def read_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; raise :class:`AnswerRefused` saying why it is not a decision."""
    try:
        return parse_decision(answer)
    except hitl.HitlAnswerError as exc:
        raise AnswerRefused(f"answer not understood ({exc})") from None
    except ValidationError as exc:
        details = "; ".join(dict.fromkeys(_wrong(e) for e in exc.errors(include_url=False)))
        raise AnswerRefused(f"answer not understood ({details}); expected {SHAPES}") from None
    except (ValueError, TypeError, LookupError, AttributeError, RecursionError) as exc:
        # the last guard of "no answer wedges a thread": an answer that trips the reading
        # itself is refused like any other, never raised from the approval node
        raise AnswerRefused(
            f"answer not understood ({type(exc).__name__}); expected {SHAPES}"
        ) from None


def _wrong(error: ErrorDetails) -> str:
    """Say what is wrong with an answer, in planexec's words (never pydantic's)."""
    kind, loc, given = error["type"], error["loc"], error["input"]
    if kind == "union_tag_invalid":
        tag = given.get("action") if isinstance(given, dict) else given
        close = difflib.get_close_matches(str(tag).strip().lower(), ACTIONS, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{_shown(tag)} is not an action{hint}: the actions are {', '.join(ACTIONS)}"
    if kind == "union_tag_not_found":
        keys = ", ".join(f'"{_shown(k, 40, quoted=False)}"' for k in given)
        return 'the answer has no "action"' + (f" (it has {keys})" if keys else "")
    if len(loc) < 2:
        return f'the answer is {_kind(given)}, not an object with an "action"'
    action, field = str(loc[0]), str(loc[1])
    article = "an" if action[0] in "aeiou" else "a"
    if kind == "missing":
        return f'{article} {action} needs "{field}": {WANTS.get(field, "a value")}'
    if kind == "extra_forbidden":
        fields = ", ".join(f'"{f}"' for f in FIELDS.get(action, ()))
        return (
            f'{article} {action} has no "{_shown(field, 40, quoted=False)}" (its fields: {fields})'
        )
    if kind == "string_pattern_mismatch":
        return f'"{field}" is blank: it must be {WANTS.get(field, "text")}'
    if kind == "string_too_long":
        limit = (error.get("ctx") or {}).get("max_length")
        return f'"{field}" is too long ({len(given):,} characters; at most {limit:,})'
    if isinstance(given, str) and WANTS.get(field, "").startswith("text"):
        return f'"{field}" cannot be read as text (it must be {WANTS[field]})'
    wrong = "a fraction" if kind == "int_from_float" else _kind(given)
    return f'"{field}" must be {WANTS.get(field, "another value")}, not {wrong}'


def _kind(value: Any) -> str:
    """Name a value's JSON kind, as a reviewer wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def _shown(value: Any, limit: int = 60, *, quoted: bool = True) -> str:
    """Quote a value of the answer, cut at ``limit`` characters."""
    if not quoted:
        text = str(value)
    else:
        text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
