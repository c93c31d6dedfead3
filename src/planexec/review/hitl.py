"""The plan approval in the ecosystem's human-in-the-loop shapes, and their answers.

Two UIs read interrupts today: LangChain v1's ``HumanInTheLoopMiddleware`` request
(``action_requests`` + ``review_configs``, answered with ``{"decisions": [...]}``; Agent Chat
UI) and the legacy Agent Inbox request (``action_request`` + ``config`` + ``description``,
answered with ``[{"type": "accept" | "edit" | "response" | "ignore", "args": ...}]``;
``create-agent-chat-app``). planexec's interrupt carries its own keys and both requests, one
action (:data:`ACTION`) whose args are the plan; :func:`from_hitl_format` reads an answer in
either style into planexec's own (``{"action": "approve" | "edit" | "reject" | "cancel"}``).
The description both requests carry is :func:`planexec.review.describe.describe_plan`'s.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain.agents.middleware import human_in_the_loop as v1
from typing_extensions import TypedDict

from planexec.state import PlanDoc
from planexec.storage.storable import unstorable_reason

ACTION = "run_plan"
"""The one action the approval asks about: run this plan."""


# The legacy Agent Inbox's shapes, under its own names. LangGraph's copies
# (``langgraph.prebuilt.interrupt``) are deprecated for ``langchain.agents.interrupt``, which
# the Python langchain does not have: the JSON is the same, and so are the schema's names.


class ActionRequest(TypedDict):
    """The legacy request's action: its name and its args (LangChain v1's is ``v1.Action``)."""

    action: str
    args: dict[str, Any]


class HumanInterruptConfig(TypedDict):
    """What the legacy request lets a reviewer do."""

    allow_ignore: bool
    allow_respond: bool
    allow_edit: bool
    allow_accept: bool


class HumanResponse(TypedDict):
    """A legacy answer: accept, ignore, a text response, or the edited action."""

    type: Literal["accept", "ignore", "response", "edit"]
    args: None | str | ActionRequest


class HitlFields(v1.HITLRequest):
    """The keys both UIs read, added to planexec's own interrupt payload."""

    action_request: ActionRequest
    config: HumanInterruptConfig
    description: str


class HitlAnswerError(ValueError):
    """A human-in-the-loop answer planexec cannot read; the message says why."""


def plan_args(plan: PlanDoc) -> dict[str, Any]:
    """Return the action's args: what a reviewer may edit (the goal and the steps)."""
    return {"goal": plan["goal"], "steps": plan["steps"]}


def requests(
    plan: PlanDoc,
    description: str,
    *,
    can_approve: bool,
    action: str = ACTION,
    args: dict[str, Any] | None = None,
) -> HitlFields:
    """Build both UIs' requests for one action (:data:`ACTION`: its args are the plan)."""
    args = plan_args(plan) if args is None else args
    allowed: list[v1.DecisionType] = (
        ["approve", "edit", "reject"] if can_approve else ["edit", "reject"]
    )
    return HitlFields(
        action_requests=[v1.ActionRequest(name=action, args=args, description=description)],
        review_configs=[v1.ReviewConfig(action_name=action, allowed_decisions=allowed)],
        action_request=ActionRequest(action=action, args=args),
        config=HumanInterruptConfig(
            allow_accept=can_approve, allow_edit=True, allow_respond=True, allow_ignore=True
        ),
        description=description,
    )


def from_hitl_format(answer: Any, action: str = ACTION) -> Any:
    """Read a v1 or legacy human-in-the-loop answer into planexec's; others pass unchanged.

    v1: approve; edit (the edited args are the plan); reject with a message (= reject with
    that feedback) or without one (= cancel). Legacy: accept; edit; response (= reject with
    the text as feedback); ignore (= cancel). One decision only: the request has one action.
    A ``version`` or ``digest`` a decision carries (v1: beside ``type``; legacy: in an accept's
    ``args``) names the plan it answers, and is checked like planexec's own.
    """
    if isinstance(answer, dict) and "decisions" in answer and "action" not in answer:
        if set(answer) != {"decisions"}:
            raise HitlAnswerError("a v1 answer has only 'decisions'")
        decisions = answer["decisions"]
        if not isinstance(decisions, list) or len(decisions) != 1:
            raise HitlAnswerError("give exactly one decision: the request has one action")
        return _decision(decisions[0], V1_KEYS, action)
    if isinstance(answer, list) and answer and all(isinstance(a, dict) for a in answer):
        if len(answer) != 1:
            raise HitlAnswerError("give exactly one response: the request has one action")
        return _decision(answer[0], LEGACY_KEYS, action)
    if isinstance(answer, dict) and "type" in answer and "action" not in answer:
        return _decision(answer, V1_KEYS | LEGACY_KEYS, action)
    return answer


NAMES = ("version", "digest")
V1_KEYS = {
    "approve": {"type", *NAMES},
    "edit": {"type", "edited_action"},
    "reject": {"type", "message"},
}
LEGACY_KEYS = {
    "accept": {"type", "args"},
    "edit": {"type", "args"},
    "response": {"type", "args"},
    "ignore": {"type", "args"},
}


def _decision(decision: Any, keys: dict[str, set[str]], action: str) -> dict[str, Any]:
    if not isinstance(decision, dict):
        raise HitlAnswerError("a decision is an object with a 'type'")
    kind = decision.get("type")
    if not isinstance(kind, str) or kind not in keys:
        raise HitlAnswerError(
            f"unknown decision type {kind!r}: approve, edit or reject "
            "(legacy: accept, edit, response or ignore)"
        )
    extra = sorted(set(decision) - keys[kind])
    if extra:
        raise HitlAnswerError(f"the {kind} decision has no {', '.join(map(repr, extra))}")
    if kind in ("approve", "accept"):
        named = decision if kind == "approve" else decision.get("args")
        names = {k: named[k] for k in NAMES if isinstance(named, dict) and k in named}
        return {"action": "approve", **names}
    if kind == "edit":
        return {"action": "edit", "plan": _edited_plan(decision, action)}
    if kind == "ignore":
        return {"action": "cancel", "reason": "ignored"}
    text = decision.get("message" if kind == "reject" else "args")
    if kind == "reject" and text is None:
        return {"action": "cancel", "reason": "rejected without a message"}
    if not isinstance(text, str) or not text.strip():
        raise HitlAnswerError(f"a {kind} needs text: the feedback for the planner")
    return {"action": "reject", "feedback": text}


def _edited_plan(decision: dict[str, Any], expected: str) -> dict[str, Any]:
    """Return the plan in an edit (v1 ``edited_action``, legacy ``args``), JSON text read."""
    if "edited_action" in decision:
        action = decision["edited_action"]
        name_key, args_key = "name", "args"
    else:
        action = decision.get("args")
        name_key, args_key = "action", "args"
    if not isinstance(action, dict) or not isinstance(action.get(args_key), dict):
        raise HitlAnswerError("an edit needs the edited action: {name, args}")
    if action.get(name_key, expected) != expected:
        raise HitlAnswerError(f"an edit cannot change the action: it is {expected!r}")
    plan = dict(action[args_key])
    if isinstance(plan.get("steps"), str):  # Agent Chat UI sends an edited field as its text
        plan["steps"] = json_text(plan["steps"], "the edited steps")
    return plan


def json_text(text: str, what: str) -> Any:
    """Decode JSON text a reviewer sent; refuse text that is not JSON or cannot be stored."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HitlAnswerError(
            f"{what} are not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number past the digit limit, deep nesting
        raise HitlAnswerError(f"{what} cannot be read: {type(exc).__name__}") from None
    reason = unstorable_reason(value)
    if reason is not None:
        raise HitlAnswerError(f"{what}: {reason}")
    return value
