"""What the approval interrupt shows the reviewer: the plan, what identifies it, and why."""

from __future__ import annotations

from typing import Literal

from planexec.context import Context
from planexec.plandoc import plan_tools
from planexec.review import describe, hitl
from planexec.review.decisions import SHAPES
from planexec.review.estimate import Estimate, estimate, estimate_lines
from planexec.review.hitl import HitlFields
from planexec.state import PlanDoc, State
from planexec.tools.registry import ToolRegistry


class ApprovalRequest(HitlFields):
    """The interrupt's payload (JSON): answer it with one of ``answers``.

    It is also a LangChain v1 HITL request and a legacy Agent Inbox interrupt
    (:class:`~planexec.review.hitl.HitlFields`): one action, ``run_plan``, whose args are the plan.
    """

    type: Literal["plan_approval"]
    plan: PlanDoc
    version: int
    digest: str
    origin: str
    """Who made the plan: ``planner``, ``replanner``, ``reviewer``, or ``state edit``."""
    side_effect_tools: list[str]
    problems: list[str]
    """Why the plan is invalid (it can then be edited, rejected or cancelled, not approved)."""
    error: str | None
    """Why the previous answer was refused, when this asks again."""
    answers: str
    estimate: Estimate
    """Model calls, tokens and cost spent so far and expected for the plan; its slowest chain."""


def approval_request(
    state: State,
    plan: PlanDoc,
    digest: str,
    problems: list[str],
    tools: ToolRegistry,
    ctx: Context,
) -> ApprovalRequest:
    """Build the interrupt's payload: the plan, what identifies it, and why it is asked again."""
    proposed = state.get("proposed")
    previous = state.get("approval") or {}
    asked_again = previous.get("action") in ("refused", "not_approved", "presented")
    error = previous.get("error") if asked_again else None
    side_effects = [t for t in plan_tools(plan) if tools.has_side_effects(t)]
    calls = describe.estimate_model_calls(
        plan, max_turns=ctx.max_executor_turns, judge=ctx.llm_judge
    )
    found = estimate(state, plan, tools, ctx)
    description = describe.describe(plan, side_effects, calls, problems, estimate_lines(found))
    return ApprovalRequest(
        **hitl.requests(plan, description, can_approve=not problems),
        type="plan_approval",
        plan=plan,
        version=plan["version"],
        digest=digest,
        origin=proposed["by"] if proposed and proposed["digest"] == digest else "state edit",
        side_effect_tools=side_effects,
        problems=problems,
        error=error,
        answers=SHAPES,
        estimate=found,
    )
