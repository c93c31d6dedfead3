"""Approval node: a human approves, edits, rejects or cancels the plan before anything runs.

The interrupt shows the plan with its ``version`` and ``digest`` (SHA-256 of its goal and
steps). Resume with ``Command(resume=...)`` and one of::

    {"action": "approve", "digest": "…"}             # or "version": N, or neither
    {"action": "edit", "plan": {"goal": ..., "steps": [...]}}   # the shown plan, changed
    {"action": "reject", "feedback": "what to change"}
    {"action": "cancel", "reason": "…"}

An answer that names a version or digest other than the plan awaiting approval is refused, so
an answer meant for one plan never approves another. Each node run asks once: a refused answer
(malformed, naming another plan, an invalid edit, approving an invalid plan) is recorded in
state with its reason and the node runs again to ask anew. Recorded decisions are never
re-judged, so replaying the thread cannot turn a refused answer into an accepted one.

Every plan is validated here, whichever way it reached state (planner, replanner, a state edit
or a fork), and only this node writes ``approved``: the executor runs a plan only if its digest
is the approved one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planexec.context import ApprovalPolicy, Context, context_of
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plandoc import plan_digest, plan_tools, step_tools, topological_order
from planexec.records import pending_record, record_key
from planexec.state import (
    ApprovalRecord,
    ApprovedPlan,
    PlanDoc,
    ProposedPlan,
    Revision,
    State,
    StepRecord,
)
from planexec.tools.registry import ToolRegistry


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
    feedback: str = Field(min_length=1)


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


class AnswerRefused(ValueError):
    """A reviewer's answer cannot be accepted; the message says why."""


def parse_decision(answer: Any) -> Approve | Edit | Reject | Cancel:
    """Read a reviewer's answer; a bare string names the action (``"approve"``)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            answer = {"action": answer.strip().lower()}
    return _decision.validate_python(answer)


def step_limit(state: State, ctx: Context) -> int:
    """Most steps an approved plan may have: the limit, plus steps kept from earlier rounds."""
    kept = sum(1 for r in (state.get("steps") or {}).values() if r.get("status") == "succeeded")
    return ctx.max_steps + kept


def plan_problems(plan: PlanDoc, tools: ToolRegistry, max_steps: int) -> list[str]:
    """Validate a plan as stored in state; return its problems (empty when it may run)."""
    try:
        validate_plan({"goal": plan["goal"], "steps": plan["steps"]}, tools, max_steps=max_steps)
    except PlanValidationError as exc:
        return exc.errors
    except (KeyError, TypeError):
        return ["the plan in state is not a plan document (goal, steps, version)"]
    return []


POLICY_ORDER: dict[ApprovalPolicy, int] = {"never": 0, "first": 1, "always": 2}


def effective_policy(operator: ApprovalPolicy, requested: ApprovalPolicy) -> ApprovalPolicy:
    """Return the stricter of the operator's policy and the one a run asks for.

    A run (its context, e.g. over the API) may ask for more approvals, never for fewer.
    """
    return max(operator, requested, key=POLICY_ORDER.__getitem__)


def needs_approval(state: State, policy: ApprovalPolicy, tools: ToolRegistry, digest: str) -> bool:
    """Decide from the policy whether the current plan must be shown to a human.

    ``first`` lets only a replanner's own revision run without asking: unchanged since the
    replanner wrote it, made from the approved plan, and adding no step that may call a
    side-effecting tool.
    """
    if policy == "never":
        return False
    if policy == "always":
        return True
    approved, proposed, plan = state.get("approved"), state.get("proposed"), state["plan"]
    assert plan is not None
    if not approved or not proposed or proposed.get("by") != "replanner":
        return True
    if proposed.get("digest") != digest or proposed.get("base") != approved["digest"]:
        return True
    added = set(proposed.get("added") or [])
    return any(
        tools.has_side_effects(t)
        for step in plan["steps"]
        if step["id"] in added
        for t in step_tools(step)
    )


def _approved(
    plan: PlanDoc, digest: str, action: Literal["approve", "edit", "auto"]
) -> dict[str, Any]:
    return {
        "approval": ApprovalRecord(action=action, version=plan["version"], digest=digest),
        "approved": ApprovedPlan(
            version=plan["version"], digest=digest, by="policy" if action == "auto" else "reviewer"
        ),
    }


def request(
    state: State, plan: PlanDoc, digest: str, problems: list[str], tools: ToolRegistry
) -> dict[str, Any]:
    """Build the interrupt's payload: the plan, what identifies it, and why it is asked again."""
    proposed = state.get("proposed")
    previous = state.get("approval") or {}
    error = previous.get("error") if previous.get("action") in ("refused", "not_approved") else None
    return {
        "type": "plan_approval",
        "plan": plan,
        "version": plan["version"],
        "digest": digest,
        "origin": proposed["by"] if proposed and proposed["digest"] == digest else "state edit",
        "side_effect_tools": [t for t in plan_tools(plan) if tools.has_side_effects(t)],
        "problems": problems,
        "error": error,
        "answers": SHAPES,
    }


def review(
    state: State,
    runtime: Runtime[Context],
    *,
    tools: ToolRegistry,
    operator_policy: ApprovalPolicy = "first",
) -> dict[str, Any]:
    """Ask the reviewer once about the current plan (unless the policy needs no one).

    The policy is the stricter of the operator's (``build_graph(approval=...)``) and the
    run's context: a client can ask for more approvals, never for fewer.
    """
    ctx = context_of(runtime.context)
    policy = effective_policy(operator_policy, ctx.approval)
    plan = state["plan"]
    assert plan is not None
    digest = plan_digest(plan)
    limit = step_limit(state, ctx)
    problems = plan_problems(plan, tools, limit)
    if not problems and not needs_approval(state, policy, tools, digest):
        return _approved(plan, digest, "auto")
    answer = interrupt(request(state, plan, digest, problems, tools))
    try:
        return _decide(state, plan, digest, problems, limit, answer, tools)
    except AnswerRefused as exc:
        return {
            "approval": ApprovalRecord(
                action="refused", version=plan["version"], digest=digest, error=str(exc)
            )
        }


def _decide(
    state: State,
    plan: PlanDoc,
    digest: str,
    problems: list[str],
    limit: int,
    answer: Any,
    tools: ToolRegistry,
) -> dict[str, Any]:
    """Apply one answer to the plan awaiting approval, or raise AnswerRefused saying why."""
    try:
        decision = parse_decision(answer)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise AnswerRefused(f"answer not understood ({details}); expected {SHAPES}") from None
    _check_names(decision.version, decision.digest, plan, digest, state)
    record = ApprovalRecord(version=plan["version"], digest=digest)
    if isinstance(decision, Approve):
        if problems:
            raise AnswerRefused(
                "this plan is invalid and cannot be approved (edit, reject or cancel it): "
                + "; ".join(problems)
            )
        return _approved(plan, digest, "approve")
    if isinstance(decision, Reject):
        return {
            "approval": ApprovalRecord(**record, action="reject"),
            "approved": None,
            "feedback": decision.feedback,
        }
    if isinstance(decision, Cancel):
        return {"approval": ApprovalRecord(**record, action="cancel", reason=decision.reason)}
    edited = dict(decision.plan)
    _check_names(edited.pop("version", None), edited.pop("digest", None), plan, digest, state)
    try:
        new = validate_plan(edited, tools, max_steps=limit)
    except PlanValidationError as exc:
        raise AnswerRefused("the edited plan is invalid: " + "; ".join(exc.errors)) from None
    return _apply_edit(state, plan, to_doc(new, version=plan["version"] + 1))


def _check_names(version: Any, digest: Any, plan: PlanDoc, current: str, state: State) -> None:
    """Refuse an answer that names a plan other than the one awaiting approval.

    A version names a plan only while it is as planexec proposed it: a state edit may keep
    the version and change the content, so such a plan must be named by its digest.
    """
    proposed = state.get("proposed")
    edited = not proposed or proposed.get("digest") != current
    if version is not None and digest is None and edited:
        raise AnswerRefused(
            f"the plan awaiting approval was changed by a state edit after it was proposed, so "
            f"its version does not identify it; answer with its digest {current}"
        )
    if version is not None and version != plan["version"]:
        raise AnswerRefused(
            f"this answer is about plan version {version}, but version {plan['version']} "
            f"(digest {current}) is awaiting approval; look at it and answer again"
        )
    if digest is not None and digest != current:
        raise AnswerRefused(
            f"this answer is about the plan with digest {digest}, but the plan awaiting "
            f"approval (version {plan['version']}) has digest {current}; look at it and "
            "answer again"
        )


def _apply_edit(state: State, plan: PlanDoc, new_plan: PlanDoc) -> dict[str, Any]:
    """Make the edited plan the new, approved revision.

    A step keeps an earlier success only if it, and every step it depends on, is unchanged.
    """
    digest = plan_digest(new_plan)
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
            records[record_key(step["id"])] = pending_record()
    return {
        **_approved(new_plan, digest, "edit"),
        "plan": new_plan,
        "proposed": ProposedPlan(version=new_plan["version"], digest=digest, by="reviewer"),
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
