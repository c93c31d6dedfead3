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

An answer applies only to the plan its request presented: the asking run compares the plan in
state with the ``presented`` record, and if a state edit changed it since, an answer that does
not name the current plan's digest is refused ("the plan changed since it was shown (v1 9f2c…
→ v1 ab12…): answer again") and the current plan is shown and asked about anew. So a plan
swapped while a reviewer looks at another is never approved in their name.

Under ``separate_approver`` an edit whose plan has side effects is recorded (``edit``) but not
approved: it is a new proposal, asked about again, and its writer may not approve it
(:func:`planexec.review.authority.maker_of`).

Every plan is validated here, whichever way it reached state (planner, replanner, a state edit
or a fork), and only this node writes ``approved``: the executor runs a plan only if its digest
is the approved one.

Every decision (a reviewer's, the policy's, a refusal, an answer after the request expired) is
appended to ``decisions`` with who gave it (:mod:`planexec.review.identity`) and when, in the
update the deciding run returns: a replay never re-judges nor duplicates it. Who may answer is
decided by :func:`planexec.review.authority.refusal`; the request's ``asked_at`` is the time
the run that showed it recorded in ``presented``, so the same on every replay of the run that
asks (no task: a sync node waiting on one would hold a pool thread under ``ainvoke``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from planexec.context import ApprovalPolicy, Context, context_of
from planexec.execution.speculation import (
    SpeculationMode,
    effective_mode,
    speculation_keys,
)
from planexec.nodes.conversation import approval_message
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.doc import plan_digest, plan_of, plan_tools
from planexec.plan.records import records_after_edit
from planexec.review import authority
from planexec.review.authority import ApprovalRules
from planexec.review.checks import check_names, plan_problems, step_limit
from planexec.review.decisions import (
    AnswerRefused,
    Approve,
    Cancel,
    Edit,
    Reject,
    ReviewDecision,
    read_decision,
)
from planexec.review.feedback import send_feedback
from planexec.review.identity import (
    describe_identity,
    identity_problem,
    on_server,
    policy_identity,
    who_answers,
    who_started,
    without_by,
)
from planexec.review.notify import HookEvent, Notifier
from planexec.review.policy import effective_policy, needs_approval
from planexec.review.request import (
    ANSWER_SCHEMA,
    ApprovalRequest,
    SpeculatedResult,
    SpeculationView,
    approval_request,
    invalid_plan,
    plan_changed,
)
from planexec.state import (
    ApprovalRecord,
    ApprovedPlan,
    Decision,
    EditedRevision,
    Identity,
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
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    operator_policy: ApprovalPolicy = "first",
    rules: ApprovalRules | None = None,
    notifier: Notifier | None = None,
    speculation: SpeculationMode = "off",
) -> dict[str, Any]:
    """Ask the reviewer once about the current plan (unless the policy needs no one).

    The policy is the stricter of the operator's (``build_graph(approval=...)``) and the
    run's context: a client can ask for more approvals, never for fewer. So is speculation
    (``speculation``, the operator's mode; ``Context.speculate``, the run's wish): the
    ``presented`` record says whether read-only steps run while the plan is asked about.
    """
    rules = rules or ApprovalRules()
    ctx = context_of(runtime.context)
    policy = effective_policy(operator_policy, ctx.approval)
    plan = plan_of(state)
    digest = plan_digest(plan)
    limit = step_limit(state, ctx)
    problems = plan_problems(plan, tools, limit)
    mode = effective_mode(speculation, ctx.speculate)
    early = speculation_keys(plan, state.get("steps") or {}, tools, mode) if not problems else {}
    if not problems and not needs_approval(state, policy, tools, digest):
        by_policy = Decision(
            action="approve",
            kind="plan",
            by=policy_identity(policy),
            at=authority.utc_now(),
            version=plan["version"],
            digest=digest,
        )
        send_feedback(by_policy, config)
        return {**_approved(plan, digest, "auto"), "decisions": [by_policy]}
    if (state.get("approval") or {}).get("action") != "presented":
        # shown (and its time kept) in a run of its own, so the asking run, which a resume
        # replays from the top, finds the same request: its expiry and the hook's "waiting"
        # come from here, once
        before = state.get("approval") or ApprovalRecord()
        # a refused answer does not renew the request: asked again, it keeps its time (only
        # an expired one, or a changed plan, gets a fresh request)
        kept = before.get("asked_at") if before.get("digest") == digest else None
        asked = kept or authority.utc_now()
        request = approval_request(
            state, plan, digest, problems, tools, ctx, asked_at=asked,
            expires_at=rules.expires_at(asked), speculation=_speculation(state, early),
        )  # fmt: skip
        # a plan changed by a state edit while asked is asked at once (not shown first): the
        # answer pending for the old plan must reach this interrupt, to be refused with why
        record = ApprovalRecord(
            action="presented", version=plan["version"], digest=digest, asked_at=asked
        )
        if request["error"]:
            record["error"] = request["error"]  # still shown when the question is asked
        if early:
            record["speculate"] = True
        message = approval_message(request, len(state.get("messages") or []))
        _notify(notifier, "waiting", config, request)
        return {"messages": [message], "approval": record, **_starter(state, config)}
    shown = state.get("approval") or ApprovalRecord()
    asked = shown.get("asked_at") or authority.utc_now()
    expires = rules.expires_at(asked)
    request = approval_request(
        state, plan, digest, problems, tools, ctx, asked_at=asked, expires_at=expires,
        speculation=_speculation(state, early),
    )  # fmt: skip
    answer = interrupt(request, response_schema=ANSWER_SCHEMA)  # the small schema: see its text
    at = authority.utc_now()
    who = who_answers(config, answer)
    said = Decision(kind="plan", by=who, at=at, version=plan["version"], digest=digest)
    if authority.expired(expires, at):
        _notify(notifier, "expired", config, request)
        why = f"the approval request expired at {expires}: answered at {at}, asked again"
        return {
            "approval": ApprovalRecord(
                action="refused", version=plan["version"], digest=digest, error=why
            ),
            "decisions": [Decision(**said, action="expired", feedback=why)],
        }

    def allowed(action: str, approving: PlanDoc) -> None:
        reason = authority.judge(rules, action, who, config, state, approving, tools)
        if reason is not None:
            raise AnswerRefused(reason)

    def proposal(edited: PlanDoc) -> str | None:
        side_effects = any(tools.has_side_effects(t) for t in plan_tools(edited))
        if not authority.proposes_only(rules, side_effects):
            return None
        return (
            f"{describe_identity(who)} edited the plan into one with side effects: another "
            "approver must approve it (separate_approver)"
        )

    try:
        bad_identity = identity_problem(config, answer)
        if bad_identity is not None:
            raise AnswerRefused(bad_identity)
        if shown.get("digest") != digest and _names_no_plan(answer):
            raise AnswerRefused(
                plan_changed(shown.get("version"), shown.get("digest"), plan, digest)
            )
        update, decision = _decide(
            state, plan, digest, problems, limit, without_by(answer), tools, allowed, proposal
        )
    except AnswerRefused as exc:
        refused = ApprovalRecord(
            action="refused", version=plan["version"], digest=digest, error=str(exc)
        )
        refused["asked_at"] = asked  # asked again about the same plan: the same deadline
        update = {"approval": refused}
        decision = Decision(action="refused", feedback=str(exc))
    said_no = update.get("approval", {}).get("action") in ("reject", "cancel")
    if said_no and shown.get("speculate"):
        # steps ran beside this question (their results are written in this same superstep,
        # so not in state yet): the speculator, routed along, discards them all next
        update = {**update, "approval": {**update["approval"], "speculate": True}}
    made = Decision(**said, **decision)
    _notify(notifier, "answered", config, request, made)
    send_feedback(made, config)  # once per answer: a resume reaches here once
    return {**update, "decisions": [made]}


def _speculation(state: State, early: dict[int, str]) -> SpeculationView | None:
    """Return what the request shows of speculation (None when nothing runs early).

    The steps that run before the approval, and the results they have so far: not approved,
    the approved plan takes only a step whose key is unchanged.
    """
    if not early:
        return None
    have = state.get("speculated") or {}
    results: dict[str, SpeculatedResult] = {}
    for sid, key in early.items():
        found = have.get(str(sid))
        if found is None or found.get("key") != key:
            continue
        record = found["record"]
        status, summary = record.get("status", "pending"), record.get("summary", "")
        shown = SpeculatedResult(status=status, summary=summary, approved=False)
        if record.get("error"):
            shown["error"] = str(record.get("error"))
        results[str(sid)] = shown
    return SpeculationView(steps=list(early), results=results)


def _starter(state: State, config: RunnableConfig) -> dict[str, Identity]:
    """Return ``started_by`` for a run whose plan was given (seeded, so intake never ran).

    A local caller (the CLI, a Python program: ``planexec run --plan``, ``Runs`` with a plan)
    starts it by asking for its first approval, under its own ``planexec_caller``. On the
    server the starter stays unknown: whoever resumes a seeded thread first is not
    necessarily who wrote its plan (maker-checker then refuses, failing closed).
    """
    if state.get("started_by") is not None or on_server(config):
        return {}
    return {"started_by": who_started(config)}


def _notify(
    notifier: Notifier | None,
    event: Literal["waiting", "expired", "answered"],
    config: RunnableConfig,
    request: ApprovalRequest,
    decision: Decision | None = None,
) -> None:
    """Tell the approval hook, if there is one, what happened to this request."""
    if notifier is None:
        return
    sent = HookEvent(
        event=event,
        thread_id=_thread_id(config),
        kind="plan",
        version=request["version"],
        digest=request["digest"],
        asked_at=request["asked_at"],
        expires_at=request["expires_at"],
    )
    if decision is not None:
        sent["action"] = decision.get("action", "")
        sent["by"] = decision.get("by") or Identity(id=None, source="unknown")
    notifier.send(sent)


def _thread_id(config: RunnableConfig) -> str | None:
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


Allowed = Callable[[str, PlanDoc], None]
"""Raises AnswerRefused if who answers may not give this answer for this plan."""
Proposal = Callable[[PlanDoc], str | None]
"""Why an edit to this plan is only a proposal (asked about again), or None if it is approved."""


def _names_no_plan(answer: Any) -> bool:
    """Tell whether a well-formed answer names no plan (no digest, no version): "this plan".

    An answer that names one is judged against the current plan by ``check_names``; one that
    cannot be read is refused for that by :func:`_decide`.
    """
    try:
        decision = read_decision(without_by(answer))
    except AnswerRefused:
        return False
    named = [decision.digest, decision.version]
    if isinstance(decision, Edit):
        named += [decision.plan.get("digest"), decision.plan.get("version")]
    return all(name is None for name in named)


def _decide(
    state: State,
    plan: PlanDoc,
    digest: str,
    problems: list[str],
    limit: int,
    answer: Any,
    tools: ToolRegistry,
    allowed: Allowed,
    proposal: Proposal,
) -> tuple[dict[str, Any], Decision]:
    """Apply one answer to the plan awaiting approval, or raise AnswerRefused saying why.

    Return the state update and what the decision record says of it (its action, feedback and
    edit).
    """
    decision: ReviewDecision = read_decision(answer)
    check_names(decision.version, decision.digest, plan, digest, state)
    record = ApprovalRecord(version=plan["version"], digest=digest)
    if not isinstance(decision, Edit):
        allowed(decision.action, plan)
    if isinstance(decision, Approve):
        if problems:
            raise AnswerRefused(invalid_plan(problems))
        return _approved(plan, digest, "approve"), Decision(action="approve")
    if isinstance(decision, Reject):
        return {
            "approval": ApprovalRecord(**record, action="reject"),
            "approved": None,
            "feedback": decision.feedback,
        }, Decision(action="reject", feedback=decision.feedback)
    if isinstance(decision, Cancel):
        cancelled = {"approval": ApprovalRecord(**record, action="cancel", reason=decision.reason)}
        return cancelled, Decision(action="cancel", feedback=decision.reason)
    edited = dict(decision.plan)
    check_names(edited.pop("version", None), edited.pop("digest", None), plan, digest, state)
    try:
        new = validate_plan(edited, tools, max_steps=limit, goal=plan["goal"])
    except PlanValidationError as exc:
        raise AnswerRefused("the edited plan is invalid: " + "; ".join(exc.errors)) from None
    new_plan = to_doc(new, version=plan["version"] + 1)
    allowed("edit", new_plan)
    made = _apply_edit(state, plan, new_plan)
    revision = EditedRevision(version=new_plan["version"], digest=made["proposed"]["digest"])
    proposed = proposal(new_plan)
    if proposed is not None:  # recorded, not approved: shown and asked about again
        made["approval"] = ApprovalRecord(
            action="refused", version=new_plan["version"], digest=revision["digest"], error=proposed
        )
        made["approved"] = None
    return made, Decision(action="edit", edited=revision)


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
