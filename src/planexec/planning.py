"""Asking a model for a plan, validating it, and sending the errors back (bounded)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from planexec import prompts
from planexec.models import usage_of
from planexec.plan import Plan, PlanValidationError, validate_plan
from planexec.state import RoleUsage, add_usage
from planexec.storable import storable_text
from planexec.tools.registry import ToolRegistry

FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


@dataclass
class PlanningResult:
    """The outcome of a planning conversation: a plan, or the last errors."""

    plan: Plan | None
    errors: list[str]
    usage: dict[str, RoleUsage] = field(default_factory=dict)
    attempts: int = 0


def _plan_data(reply: BaseMessage) -> tuple[Any, str | None]:
    """Extract the plan JSON from a model reply: the Plan tool call, or JSON text."""
    for call in getattr(reply, "tool_calls", None) or []:
        if call["name"] == "Plan":
            return call["args"], None
    for bad in getattr(reply, "invalid_tool_calls", None) or []:
        return None, f"the Plan tool call's arguments are not valid JSON: {bad.get('error')}"
    text = reply.content if isinstance(reply.content, str) else ""
    if text.strip():
        try:
            return json.loads(FENCE.sub("", text.strip())), None
        except ValueError as exc:  # JSONDecodeError, or a number past Python's digit limit
            return None, f"the reply is neither a Plan tool call nor valid JSON: {exc}"
    return None, "the reply contained no plan: call the Plan tool"


def request_plan(
    model: BaseChatModel,
    messages: list[BaseMessage],
    tools: ToolRegistry,
    *,
    role: str,
    max_steps: int,
    max_repairs: int,
    kept: frozenset[int] = frozenset(),
) -> PlanningResult:
    """Ask for a plan; while it is invalid, send the errors back, at most ``max_repairs`` times."""
    bound = model.bind_tools([Plan], tool_choice="Plan")
    conversation = list(messages)
    result = PlanningResult(plan=None, errors=[])
    for _ in range(max_repairs + 1):
        reply = bound.invoke(conversation)
        result.attempts += 1
        result.usage = add_usage(result.usage, usage_of(role, reply))
        data, problem = _plan_data(reply)
        if problem is None:
            try:
                result.plan = validate_plan(data, tools, max_steps=max_steps, kept=kept)
            except PlanValidationError as exc:
                result.errors = [storable_text(e) for e in exc.errors]
            else:
                result.errors = []
                return result
        else:
            result.errors = [storable_text(problem)]  # it may quote the model's raw reply
        shown = json.dumps(data, indent=1, default=str)[:20_000] if data is not None else "(none)"
        conversation.append(
            HumanMessage(
                prompts.PLAN_REPAIR.format(
                    errors="\n".join(f"- {e}" for e in result.errors[:50]), plan=shown
                )
            )
        )
    return result
