"""Approval node: a human approves, edits, rejects or cancels the plan before anything runs.

Resume with ``Command(resume=...)`` and one of::

    {"action": "approve"}
    {"action": "edit", "plan": {"goal": ..., "steps": [...]}}
    {"action": "reject", "feedback": "what to change"}
    {"action": "cancel"}

A malformed answer or an invalid edited plan is refused: the interrupt is asked again, with
the reason in its ``"error"`` field and the plan unchanged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from planexec.context import Context, context_of
from planexec.plan import Plan, PlanValidationError, to_doc, topological_order, validate_plan
from planexec.state import PlanDoc, Revision, State, StepRecord
from planexec.tools.registry import ToolRegistry


class Approve(BaseModel):
    """Run the plan as it is."""

    action: Literal["approve"]


class Edit(BaseModel):
    """Run this plan instead (validated like a planner's plan)."""

    action: Literal["edit"]
    plan: dict[str, Any]


class Reject(BaseModel):
    """Send the plan back to the planner with feedback."""

    action: Literal["reject"]
    feedback: str = Field(min_length=1)


class Cancel(BaseModel):
    """Stop the run without executing anything."""

    action: Literal["cancel"]
    reason: str = ""


ReviewDecision = Annotated[Approve | Edit | Reject | Cancel, Field(discriminator="action")]
_decision = TypeAdapter(ReviewDecision)
SHAPES = (
    '{"action": "approve"} | {"action": "edit", "plan": {...}} | '
    '{"action": "reject", "feedback": "..."} | {"action": "cancel"}'
)


def parse_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; a bare string names the action (``"approve"``)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            answer = {"action": answer.strip().lower()}
    return _decision.validate_python(answer)


def needs_approval(state: State, ctx: Context, tools: ToolRegistry) -> bool:
    """Decide from the policy whether the current plan must be shown to a human."""
    if ctx.approval == "never":
        return False
    if ctx.approval == "always" or not state.get("approved_version"):
        return True
    plan = state["plan"]
    assert plan is not None
    approved = set(state.get("approved_tools", []))
    return any(
        s["tool"] and s["tool"] not in approved and tools.has_side_effects(s["tool"])
        for s in plan["steps"]
    )


def _tools_of(plan: PlanDoc) -> list[str]:
    return sorted({s["tool"] for s in plan["steps"] if s["tool"]})


def _approved(state: State, plan: PlanDoc, action: str) -> dict[str, Any]:
    return {
        "approval": {"action": action, "version": plan["version"]},
        "approved_version": plan["version"],
        "approved_tools": sorted(set(state.get("approved_tools", [])) | set(_tools_of(plan))),
    }


def review(state: State, runtime: Runtime[Context], *, tools: ToolRegistry) -> dict[str, Any]:
    """Pause for the reviewer's decision (unless the policy says this plan needs none)."""
    ctx = context_of(runtime.context)
    plan = state["plan"]
    assert plan is not None
    if not needs_approval(state, ctx, tools):
        return _approved(state, plan, "auto")
    decision, edited = _ask(plan, ctx, tools)
    if isinstance(decision, Approve):
        return _approved(state, plan, "approve")
    if isinstance(decision, Reject):
        return {
            "approval": {"action": "reject", "version": plan["version"]},
            "feedback": decision.feedback,
        }
    if isinstance(decision, Cancel):
        return {
            "approval": {"action": "cancel", "version": plan["version"], "reason": decision.reason}
        }
    assert edited is not None
    return _apply_edit(state, plan, edited)


def _ask(
    plan: PlanDoc, ctx: Context, tools: ToolRegistry
) -> tuple[Approve | Edit | Reject | Cancel, Plan | None]:
    """Interrupt until the reviewer gives an answer that parses (and an edit that validates)."""
    problem: str | None = None
    while True:  # each refused answer is one more interrupt; the node replays them in order
        answer = interrupt(
            {
                "type": "plan_approval",
                "plan": plan,
                "version": plan["version"],
                "side_effect_tools": [t for t in _tools_of(plan) if tools.has_side_effects(t)],
                "error": problem,
                "answers": SHAPES,
            }
        )
        try:
            decision = parse_decision(answer)
            if not isinstance(decision, Edit):
                return decision, None
            return decision, validate_plan(decision.plan, tools, max_steps=ctx.max_steps)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            problem = f"answer not understood ({details}); expected {SHAPES}"
        except PlanValidationError as exc:
            problem = "the edited plan is invalid: " + "; ".join(exc.errors)


def _apply_edit(state: State, plan: PlanDoc, edited: Plan) -> dict[str, Any]:
    """Make the edited plan the new, approved revision.

    A step keeps an earlier success only if it, and every step it depends on, is unchanged.
    """
    new_plan = to_doc(edited, version=plan["version"] + 1)
    old_records = state.get("steps", {})
    old_steps = {s["id"]: s for s in plan["steps"]}
    kept: set[int] = set()
    records: dict[str, StepRecord] = {}
    for step in topological_order(new_plan["steps"]):
        rec = old_records.get(str(step["id"]))
        if (
            rec is not None
            and rec.get("status") == "succeeded"
            and old_steps.get(step["id"]) == step
            and all(dep in kept for dep in step["depends_on"])
        ):
            kept.add(step["id"])
            records[str(step["id"])] = rec
        else:
            records[str(step["id"])] = StepRecord(status="pending", attempts=0)
    return {
        **_approved(state, new_plan, "edit"),
        "plan": new_plan,
        "steps": {str(s["id"]): records[str(s["id"])] for s in new_plan["steps"]},
        "revisions": [
            Revision(
                version=plan["version"],
                reason="edited by the reviewer",
                plan=plan,
                outcomes=dict(old_records),
            )
        ],
    }
