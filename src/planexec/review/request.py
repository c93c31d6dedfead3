"""What the approval interrupt shows the reviewer: the plan, what identifies it, and why."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from planexec.plandoc import plan_tools
from planexec.review.decisions import SHAPES
from planexec.state import PlanDoc, State
from planexec.tools.registry import ToolRegistry


class ApprovalRequest(TypedDict):
    """The interrupt's payload (JSON): answer it with one of ``answers``."""

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


def approval_request(
    state: State, plan: PlanDoc, digest: str, problems: list[str], tools: ToolRegistry
) -> ApprovalRequest:
    """Build the interrupt's payload: the plan, what identifies it, and why it is asked again."""
    proposed = state.get("proposed")
    previous = state.get("approval") or {}
    error = previous.get("error") if previous.get("action") in ("refused", "not_approved") else None
    return ApprovalRequest(
        type="plan_approval",
        plan=plan,
        version=plan["version"],
        digest=digest,
        origin=proposed["by"] if proposed and proposed["digest"] == digest else "state edit",
        side_effect_tools=[t for t in plan_tools(plan) if tools.has_side_effects(t)],
        problems=problems,
        error=error,
        answers=SHAPES,
    )
