"""Failure review node: a human decides what follows a step that failed under ``on_failure: "ask"``.

The evaluator sends the run here after a round in which such a step failed (every step that
could run has run: independent branches finish before the question). The interrupt
(:class:`FailureRequest`) shows the step, its error and its inputs, scrubbed of secrets like
everything a run shows. Answers name the step and say one of:

* ``{"action": "retry", "step": N}``: run it again as it is;
* ``{"action": "retry", "step": N, "args": {...}}``: run it with these arguments. That is a new
  plan version (validated like any edit), which the approval node approves by its policy;
* ``{"action": "skip", "step": N}``: go on without it (steps using its output are skipped);
* ``{"action": "replan", "step": N, "hint": "..."}``: the replanner revises the plan, told
  the hint;
* ``{"action": "cancel", "step": N, "reason": "..."}``: the run ends, cancelled.

An answer that is malformed, names another step, or edits the arguments into an invalid plan
is refused and asked again; each step is asked about at most
:data:`planexec.nodes.evaluator.MAX_ASKS_PER_STEP` times.

An answer applies only to the plan its question presented (the approved plan, whose step
failed): if a state edit changed the plan while the question waited, the answer is not applied
but recorded as refused ("the plan changed since it was shown (v1 9f2c… → v1 ab12…): answer
again") and the changed plan goes to the approval node, to be shown and asked about. Under
``separate_approver``, whoever retried a step with new arguments wrote that plan version: the
approval node lets another approver approve it.

Like the approval's, every answer is a decision record (``decisions``, ``kind:
"step_failure"``) naming who gave it and when; who may give it, and until when, is decided by
:mod:`planexec.review.authority` (an answer after the request expired is not taken: the
question is asked again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from planexec.context import Context, context_of
from planexec.nodes.evaluator import downstream
from planexec.nodes.executor import approval_problem
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.doc import plan_digest, plan_of
from planexec.plan.records import current_records, pending_record, record_key, records_after_edit
from planexec.redaction.secrets import redact
from planexec.review import authority, hitl
from planexec.review.authority import ApprovalRules
from planexec.review.checks import step_limit
from planexec.review.failure import (
    ACTION,
    ANSWERS,
    MAX_HINT_CHARS,
    FailureRequest,
    Refused,
    describe_failure,
    from_hitl,
)
from planexec.review.feedback import send_feedback
from planexec.review.identity import identity_problem, who_answers, without_by
from planexec.review.notify import HookEvent, Notifier
from planexec.review.request import plan_changed
from planexec.state import (
    Decision,
    FailureAnswer,
    FailureQuestion,
    PlanDoc,
    ProposedPlan,
    Revision,
    State,
    StepDoc,
    StepRecord,
)
from planexec.storage.storable import storable_text
from planexec.tools.registry import ToolRegistry


def review_failure(
    state: State,
    runtime: Runtime[Context],
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    rules: ApprovalRules | None = None,
    notifier: Notifier | None = None,
) -> dict[str, Any]:
    """Ask the reviewer once what follows the failed step; apply the answer."""
    rules = rules or ApprovalRules()
    ctx = context_of(runtime.context)
    plan = plan_of(state)
    evaluation = state.get("evaluation")
    sid = (evaluation["retry"] or [0])[0] if evaluation else 0
    step = next((s for s in plan["steps"] if s["id"] == sid), None)
    if step is None or approval_problem(state):  # a state edit changed the plan since:
        return _plan_changed(state, config, plan, sid)  # the executor sends it to approval
    records = current_records(plan, state.get("steps") or {})
    asks = dict(state.get("failure_asks") or {})
    asked = asks.get(record_key(sid), 0) + 1
    previous = state.get("failure_answer") or {}
    error = str(records.get(record_key(sid), {}).get("error") or "")
    digest = plan_digest(plan)
    question = state.get("failure_question")
    fresh = question is None or question["step"] != sid
    # the question's time is kept in a run of its own, so the asking run (replayed from the
    # top on resume) finds it, and the hook hears "waiting" once
    asked_at = authority.utc_now() if fresh or question is None else question["asked_at"]
    expires_at = rules.expires_at(asked_at)
    event = HookEvent(
        event="waiting",
        thread_id=_thread_id(config),
        kind="step_failure",
        version=plan["version"],
        digest=digest,
        asked_at=asked_at,
        expires_at=expires_at,
        step=sid,
    )
    if fresh:
        if notifier is not None:
            notifier.send(event)
        shown = FailureQuestion(step=sid, digest=digest, asked_at=asked_at)
        kept = previous if previous.get("action") == "refused" else None  # says why, asked again
        return {"failure_question": shown, "failure_answer": kept}
    answer = interrupt(
        redact(
            FailureRequest(
                **hitl.requests(
                    plan,
                    describe_failure(step, error),
                    can_approve=True,
                    action=ACTION,
                    args={"args": step["args"]},
                ),
                type="step_failure",
                step=step,
                error=error,
                inputs={
                    record_key(d): str(records.get(record_key(d), {}).get("summary") or "")
                    for d in step["depends_on"]
                },
                version=plan["version"],
                digest=digest,
                asked=asked,
                refused=previous.get("error") if previous.get("action") == "refused" else None,
                answers=ANSWERS,
                asked_at=asked_at,
                expires_at=expires_at,
            )
        )
    )
    at = authority.utc_now()
    who = who_answers(config, answer)
    said = Decision(
        kind="step_failure", by=who, at=at, version=plan["version"], digest=digest, step=sid
    )
    if authority.expired(expires_at, at):
        why = f"the question expired at {expires_at}: answered at {at}, asked again"
        if notifier is not None:
            notifier.send(HookEvent(**{**event, "event": "expired"}))
        return {
            "failure_question": None,
            "failure_answer": FailureAnswer(action="refused", step=sid, error=why),
            "decisions": [Decision(**said, action="expired", feedback=why)],
        }

    def allowed(action: str) -> None:
        bad_identity = identity_problem(config, answer)
        if bad_identity is not None:
            raise Refused(bad_identity)
        reason = authority.judge(rules, action, who, config, state, plan, tools)
        if reason is not None:
            raise Refused(reason)

    try:
        update = _apply(state, ctx, tools, plan, step, records, without_by(answer), allowed)
    except Refused as exc:
        update = {"failure_answer": FailureAnswer(action="refused", step=sid, error=str(exc))}
    else:
        asks[record_key(sid)] = asked
        update["failure_asks"] = asks
    taken: FailureAnswer = update["failure_answer"]
    made = Decision(**said, action=taken.get("action", "refused"))
    feedback = taken.get("error") or taken.get("hint") or taken.get("reason")
    if feedback:
        made["feedback"] = feedback
    if taken.get("action") == "edit":
        made["edited"] = {
            "version": update["plan"]["version"],
            "digest": update["proposed"]["digest"],
        }
    if notifier is not None:
        notifier.send(HookEvent(**{**event, "event": "answered"}, action=made["action"], by=who))
    send_feedback(made, config)  # once per answer: a resume reaches here once
    return {**update, "failure_question": None, "decisions": [made]}


def _plan_changed(state: State, config: RunnableConfig, plan: PlanDoc, sid: int) -> dict[str, Any]:
    """Take the answer pending for the plan asked about, and refuse it: the plan changed since.

    The question was asked about the approved plan; the answer is recorded as refused (it
    never applies to another plan), and the changed plan goes on to the approval node.
    """
    approved = state.get("approved")
    digest = plan_digest(plan)
    why = plan_changed(
        approved["version"] if approved else None,
        approved["digest"] if approved else None,
        plan,
        digest,
    )
    answer = interrupt({"type": "plan_changed", "step": sid, "error": why})
    who = who_answers(config, answer)
    refused = Decision(
        action="refused",
        kind="step_failure",
        by=who,
        at=authority.utc_now(),
        version=plan["version"],
        digest=digest,
        step=sid,
        feedback=why,
    )
    return {
        "failure_answer": None,
        "failure_question": None,
        "evaluation": None,
        "decisions": [refused],
    }


def _thread_id(config: RunnableConfig) -> str | None:
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


def _apply(
    state: State,
    ctx: Context,
    tools: ToolRegistry,
    plan: PlanDoc,
    step: StepDoc,
    records: dict[str, StepRecord],
    answer: Any,
    allowed: Callable[[str], None],
) -> dict[str, Any]:
    sid = step["id"]
    answer = from_hitl(answer, sid)
    if not isinstance(answer, dict):
        raise Refused(f"an answer is an object. {ANSWERS}")
    action, named = answer.get("action"), answer.get("step", sid)
    if named != sid or isinstance(named, bool):
        raise Refused(f"this question is about step {sid}, not {named!r}")
    unknown = set(answer) - {"action", "step", "args", "hint", "reason"}
    if unknown:
        raise Refused(f"unknown field(s) {sorted(map(str, unknown))}. {ANSWERS}")
    if action in ("retry", "skip", "replan", "cancel"):
        allowed(action)
    if action == "retry" and "args" in answer:
        return _edited(state, ctx, tools, plan, step, answer["args"])
    if action == "retry":
        again = {sid} | {d for d in downstream(plan["steps"], {sid}) if _not_done(records, d)}
        fresh = {k: (pending_record() if int(k) in again else r) for k, r in records.items()}
        return {"steps": fresh, "failure_answer": FailureAnswer(action="retry", step=sid)}
    if action == "skip":
        after = downstream(plan["steps"], {sid})
        fresh = {
            k: (pending_record() if int(k) in after and r.get("status") == "skipped" else r)
            for k, r in records.items()
        }
        skipped = sorted({*(state.get("reviewer_skipped") or []), sid})
        return {
            "steps": fresh,
            "reviewer_skipped": skipped,
            "failure_answer": FailureAnswer(action="skip", step=sid),
        }
    if action == "replan":
        hint = _text(answer.get("hint", ""), "hint")
        return {
            "failure_answer": FailureAnswer(action="replan", step=sid, hint=hint),
            "feedback": hint or None,
        }
    if action == "cancel":
        reason = _text(answer.get("reason", ""), "reason") or "cancelled at a failed step"
        return {"failure_answer": FailureAnswer(action="cancel", step=sid, reason=reason)}
    raise Refused(f"unknown action {action!r}. {ANSWERS}")


def _not_done(records: dict[str, StepRecord], sid: int) -> bool:
    return records.get(record_key(sid), {}).get("status") in ("skipped", "failed", "pending")


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise Refused(f"the {name} is text")
    return storable_text(value.strip(), MAX_HINT_CHARS)


def _edited(
    state: State, ctx: Context, tools: ToolRegistry, plan: PlanDoc, step: StepDoc, args: Any
) -> dict[str, Any]:
    """Make the step's new arguments a new plan version, for the approval node to approve."""
    if not isinstance(args, dict):
        raise Refused("args are the step's arguments, an object")
    steps = [{**s, "args": args} if s["id"] == step["id"] else s for s in plan["steps"]]
    try:
        valid = validate_plan(
            {"goal": plan["goal"], "steps": steps}, tools, max_steps=step_limit(state, ctx)
        )
    except PlanValidationError as exc:
        raise Refused("the edited step makes the plan invalid: " + "; ".join(exc.errors)) from None
    new_plan = to_doc(valid, version=plan["version"] + 1)
    digest = plan_digest(new_plan)
    old_records = state.get("steps") or {}
    return {
        "plan": new_plan,
        "proposed": ProposedPlan(version=new_plan["version"], digest=digest, by="reviewer"),
        "steps": records_after_edit(plan, new_plan, old_records),
        "approval": None,
        "approved": None,
        "revisions": [
            Revision(
                version=plan["version"],
                reason=f"step {step['id']} edited by the reviewer after it failed",
                plan=plan,
                outcomes=dict(old_records),
            )
        ],
        "failure_answer": FailureAnswer(action="edit", step=step["id"]),
    }
