"""Drafting a plan with a model: ask for one, validate it, send the errors back (bounded).

The planner node drafts a plan for the task, the replanner one for the remaining work; both
hold a :func:`drafting` conversation through :func:`draft_plan`. The schema and its validation
are :mod:`planexec.plan`; the judge's questions are :mod:`planexec.judging`'s.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.json import parse_json_markdown

from planexec.drafting.preview import PlanPreview, StepsSeen
from planexec.errors import IncompleteReplyError
from planexec.llm import prompts
from planexec.plan import Plan, PlanValidationError, validate_plan
from planexec.plan.compact import CompactPlan
from planexec.storage.storable import storable_text
from planexec.tools.registry import ToolRegistry


@dataclass
class Draft:
    """The outcome of a drafting conversation: a valid plan, or the last errors."""

    plan: Plan | None
    errors: list[str]
    attempts: int = 0


Reply = BaseMessage | IncompleteReplyError
"""What a drafting conversation is sent: the model's reply, or why it did not end normally."""

_THINKING = re.compile(r"^\s*<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def plan_data(reply: Reply) -> tuple[Any, str | None]:
    """Extract the plan JSON from a model reply: the Plan tool call, or JSON text.

    Returns ``(data, None)``, or ``(None, problem)`` when the reply holds no readable plan.
    JSON text may be fenced as Markdown (```json … ```) and follow a ``<think>`` block; text
    blocks of a list content are read in order. A reply that did not end normally (cut off,
    filtered, refused: :mod:`planexec.llm.calls`) holds no plan, whatever it holds.
    """
    if refused(reply):
        return None, f"{reply} (a refusal is not asked again)"
    if isinstance(reply, IncompleteReplyError):
        return None, (
            f"{reply} (the plan was not read: write the whole plan again"
            + (", shorter: use the compact form)" if reply.reason in CUT_SHORT else ")")
        )
    for call in getattr(reply, "tool_calls", None) or []:
        if call["name"] == "Plan":
            return call["args"], None
    for bad in getattr(reply, "invalid_tool_calls", None) or []:
        return None, f"the Plan tool call's arguments are not valid JSON: {bad.get('error')}"
    text = _THINKING.sub("", reply_text(reply), count=1)
    if text.strip():
        try:  # json.loads, not the default partial parser: a cut-off plan is not a plan
            return parse_json_markdown(text, parser=json.loads), None
        except ValueError as exc:  # JSONDecodeError, or a number past Python's digit limit
            return None, f"the reply is neither a Plan tool call nor valid JSON: {exc}"
    return None, "the reply contained no plan: call the Plan tool"


def reply_text(reply: BaseMessage) -> str:
    """Return a reply's text: its content, or the text blocks of a list content, joined."""
    if isinstance(reply.content, str):
        return reply.content
    return "".join(
        str(b.get("text") or "")
        for b in reply.content
        if isinstance(b, dict) and b.get("type") == "text"
    )


CUT_SHORT = frozenset({"length", "max_tokens", "MAX_TOKENS"})


def refused(reply: Reply) -> bool:
    """Say whether a reply was the model's refusal (the provider's ``refusal`` field).

    A refusal is the model's answer to the request, not a fault of its reply: asking again
    with the errors (a repair) or as a passing error (a retry) asks the same question, and
    providers bill each. The model layer asks a streamed request that came back empty once
    more, whole, to read the refusal's words (:mod:`planexec.llm.calls`); that is the one
    time a refusal is asked again.
    """
    return isinstance(reply, IncompleteReplyError) and reply.reason == "refusal"


Drafting = Generator[list[BaseMessage], Reply, Draft]
"""A drafting conversation without I/O: yields the messages to send, is sent each reply."""


def drafting(
    messages: list[BaseMessage],
    tools: ToolRegistry,
    *,
    max_steps: int,
    max_repairs: int,
    kept: frozenset[int] = frozenset(),
    goal: str | None = None,
) -> Drafting:
    """Ask for a plan; while it is invalid, send the errors back, at most ``max_repairs`` times.

    A refusal (:func:`refused`) ends the conversation at once, with the refusal as its error.

    ``goal`` is the goal of a plan that states none (the model may leave it out).

    The conversation makes no model call itself: :func:`draft_plan` makes them.
    """
    conversation = list(messages)
    draft = Draft(plan=None, errors=[])
    for _ in range(max_repairs + 1):
        reply = yield conversation
        draft.attempts += 1
        data, problem = plan_data(reply)
        if problem is None:
            try:
                draft.plan = validate_plan(data, tools, max_steps=max_steps, kept=kept, goal=goal)
            except PlanValidationError as exc:
                draft.errors = [storable_text(e) for e in exc.errors]
            else:
                draft.errors = []
                return draft
        else:
            draft.errors = [storable_text(problem)]  # it may quote the model's raw reply
            if refused(reply):
                return draft
        shown = json.dumps(data, indent=1, default=str)[:20_000] if data is not None else "(none)"
        conversation.append(
            HumanMessage(
                prompts.PLAN_REPAIR.format(
                    errors="\n".join(f"- {e}" for e in draft.errors[:50]), plan=shown
                )
            )
        )
    return draft


async def draft_plan(
    model: BaseChatModel,
    conversation: Drafting,
    config: RunnableConfig | None = None,
    *,
    by: str = "planner",
    on_step: StepsSeen | None = None,
) -> Draft:
    """Hold a drafting conversation with ``model`` (through its async API, whoever runs it).

    ``config`` goes to every model call (e.g. a :class:`planexec.llm.usage.UsageCounter`'s). The
    steps stream as ``plan_step`` events while the model writes them (:class:`PlanPreview`);
    ``on_step`` sees each step of the first draft as it completes (not those of repairs).
    """
    bound = model.bind_tools([CompactPlan], tool_choice="Plan")
    try:
        messages = next(conversation)
        for attempt in itertools.count(1):
            reply: Reply
            with PlanPreview(by, attempt, on_step if attempt == 1 else None):
                try:
                    reply = await bound.ainvoke(messages, config)
                except IncompleteReplyError as exc:  # a cut or refused reply: asked again
                    reply = exc
            messages = conversation.send(reply)
    except StopIteration as done:
        return cast(Draft, done.value)
    raise AssertionError("unreachable")  # pragma: no cover
