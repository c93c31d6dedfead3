"""Approval node: a human approves, edits, rejects or cancels the plan before anything runs.

The interrupt (:mod:`planexec.review.request`) shows the plan with its ``version`` and
``digest`` (SHA-256 of its goal and steps); the answers are those of
:mod:`planexec.review.decisions`. An answer that names a version or digest other than the plan
awaiting approval is refused, so an answer meant for one plan never approves another. Each
node run asks once: a refused answer (malformed, naming another plan, an invalid edit,
approving an invalid plan) is recorded in state with its reason and the node runs again to ask
anew. Recorded decisions are never re-judged, so replaying the thread cannot turn a refused
answer into an accepted one.

A node run that will ask first puts the question under an AI message showing the plan (and
why a previous answer was refused): it writes that message, records ``presented`` and runs
again to ask (chat UIs draw an interrupt's controls under the last message if it is an AI one).

Every plan is validated here, whichever way it reached state (planner, replanner, a state edit
or a fork), and only this node writes ``approved``: the executor runs a plan only if its digest
is the approved one.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from planexec.context import ApprovalPolicy, Context, context_of
from planexec.nodes.conversation import approval_message
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.doc import plan_digest, plan_of
from planexec.plan.records import records_after_edit
from planexec.review.checks import check_names, plan_problems, step_limit
from planexec.review.decisions import (
    AnswerRefused,
    Approve,
    Cancel,
    Reject,
    read_decision,
    response_schema,
)
from planexec.review.policy import effective_policy, needs_approval
from planexec.review.request import approval_request, invalid_plan
from planexec.state import (
    ApprovalRecord,
    ApprovedPlan,
    PlanDoc,
    ProposedPlan,
    Revision,
    State,
)
from planexec.tools.registry import ToolRegistry


def _approved(
    plan: PlanDoc, digest: str, action: Literal["approve", "edit", "auto"]
) -> dict[str, Any]:
    return {
        "approval": ApprovalRecord(action=action, version=plan["version"], digest=digest),
        "approved": ApprovedPlan(
            version=plan["version"], digest=digest, by="policy" if action == "auto" else "reviewer"
        ),
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
    plan = plan_of(state)
    digest = plan_digest(plan)
    limit = step_limit(state, ctx)
    problems = plan_problems(plan, tools, limit)
    if not problems and not needs_approval(state, policy, tools, digest):
        return _approved(plan, digest, "auto")
    request = approval_request(state, plan, digest, problems, tools, ctx)
    if (state.get("approval") or {}).get("action") != "presented":
        # a plan changed by a state edit while asked is asked at once (not shown first): the
        # answer pending for the old plan must reach this interrupt, to be refused with why
        record = ApprovalRecord(action="presented", version=plan["version"], digest=digest)
        if request["error"]:
            record["error"] = request["error"]  # still shown when the question is asked
        message = approval_message(request, len(state.get("messages") or []))
        return {"messages": [message], "approval": record}
    answer = interrupt(request, response_schema=response_schema())
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
    decision = read_decision(answer)
    check_names(decision.version, decision.digest, plan, digest, state)
    record = ApprovalRecord(version=plan["version"], digest=digest)
    if isinstance(decision, Approve):
        if problems:
            raise AnswerRefused(invalid_plan(problems))
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
    check_names(edited.pop("version", None), edited.pop("digest", None), plan, digest, state)
    try:
        new = validate_plan(edited, tools, max_steps=limit, goal=plan["goal"])
    except PlanValidationError as exc:
        raise AnswerRefused("the edited plan is invalid: " + "; ".join(exc.errors)) from None
    return _apply_edit(state, plan, to_doc(new, version=plan["version"] + 1))


def _apply_edit(state: State, plan: PlanDoc, new_plan: PlanDoc) -> dict[str, Any]:
    """Make the edited plan the new, approved revision.

    A step keeps an earlier success only if it, and every step it depends on, is unchanged.
    """
    digest = plan_digest(new_plan)
    old_records = state.get("steps", {})
    return {
        **_approved(new_plan, digest, "edit"),
        "plan": new_plan,
        "proposed": ProposedPlan(version=new_plan["version"], digest=digest, by="reviewer"),
        "steps": records_after_edit(plan, new_plan, old_records),
        "revisions": [
            Revision(
                version=plan["version"],
                reason="edited by the reviewer",
                plan=plan,
                outcomes=dict(old_records),
            )
        ],
    }
