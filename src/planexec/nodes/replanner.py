"""Replanner node: revise the remaining work around failures, keeping what succeeded.

Succeeded steps stay in the plan and are never run again; the planner model writes only
new steps (which may depend on kept ones). A revision that repeats the failed steps, or that
cannot be made valid, ends the run with a partial result instead of looping.

When no one approves plans (policy ``never``), the revision's new steps start while the model
writes it, in this node, exactly as the planner's first plan does
(:mod:`planexec.execution.streaming`, the same round): kept steps count as done. A revision
the rules above refuse after some of its steps started ends the run all the same; those steps
(run once) are recorded in ``revisions``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from planexec.context import ApprovalPolicy, Context, context_of
from planexec.drafting import Draft, Drafting, drafting
from planexec.drafting.revising import keepable, replanner_messages, signature
from planexec.execution.streaming import (
    draft_call,
    drafted_and_ran,
    opening_of,
    round_args,
    started_before,
)
from planexec.llm import models, prompts
from planexec.llm.usage import UsageCounter
from planexec.nodes.executor import step_task
from planexec.plan import Plan, PlanValidationError, Step, to_doc, validate_plan
from planexec.plan.doc import plan_digest, plan_of
from planexec.plan.records import current_records, pending_record, record_key
from planexec.review.policy import effective_policy
from planexec.spending.budget import run_budget
from planexec.state import PlanDoc, ProposedPlan, Revision, State, StepDoc, StepRecord
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox


@dataclass(frozen=True)
class Revising:
    """What a revision starts from: the plan, its records, and the steps it keeps or loses."""

    plan: PlanDoc
    records: dict[str, StepRecord]
    kept_steps: list[StepDoc]
    lost_steps: list[StepDoc]

    @property
    def kept_ids(self) -> frozenset[int]:
        """The ids of the kept steps."""
        return frozenset(s["id"] for s in self.kept_steps)


def replanner_call(
    state: State, ctx: Context, *, tools: ToolRegistry, chat_models: models.ChatModels
) -> tuple[BaseChatModel, Drafting, Revising]:
    """Return the planner's model, the replanning conversation, and what the revision keeps."""
    plan = plan_of(state)
    records = state.get("steps", {})
    kept_steps = keepable(plan["steps"], current_records(plan, records))
    start = Revising(plan, records, kept_steps, [s for s in plan["steps"] if s not in kept_steps])
    messages = replanner_messages(plan, records, kept_steps, ctx.max_steps, tools)
    hint = (
        state.get("feedback")
        if (state.get("failure_answer") or {}).get("action") == "replan"
        else None
    )
    if hint:  # a reviewer asked for this revision at a failed step
        messages.append(HumanMessage(prompts.REVIEWER_HINT.format(hint=hint)))
    conversation = drafting(
        messages,
        tools,
        max_steps=ctx.max_steps,
        max_repairs=ctx.max_plan_repairs,
        kept=start.kept_ids,
        goal=plan["goal"],
    )
    return chat_models.for_role("planner", ctx), conversation, start


async def replan(
    state: State,
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: models.ChatModels,
    operator_policy: ApprovalPolicy = "first",
    sync_run: bool = False,
) -> dict[str, Any]:
    """Ask the planner model for the remaining work and merge it with the kept steps.

    When no one approves plans (the stricter of ``operator_policy`` and the run's is
    ``never``), the revision's new steps start while the model writes it, as the planner's
    do (:mod:`planexec.execution.streaming`), and its first round runs here; a run resumed
    after an earlier attempt finished steps that way finds them again, never runs them twice.
    ``sync_run``: a sync run (``invoke``) runs this on planexec's background loop.
    """
    ctx = context_of(get_runtime(Context).context)
    policy = effective_policy(operator_policy, ctx.approval)
    # steps an earlier attempt finished, as the revision streamed
    finished = await started_before(config, sync_run=sync_run)
    counter = UsageCounter("replanner")
    model, conversation, start = await asyncio.to_thread(  # may load a model
        partial(replanner_call, tools=tools, chat_models=chat_models), state, ctx
    )
    budget = run_budget(state, ctx)
    shared = round_args(ctx, budget, tools, sandbox, chat_models, sync_run=sync_run)
    call_step = step_task(sync_run)
    opening = opening_of(policy, finished, call_step, **shared, **_revision_round(start))
    parts = _drafting_parts(state, ctx, counter, tools, chat_models, start)
    call = draft_call("replanner", model, conversation, budget, counter, **parts)
    return await drafted_and_ran(state, config, opening, call)


def _conversation(
    state: State, ctx: Context, *, tools: ToolRegistry, chat_models: models.ChatModels
) -> Drafting:
    """Return a new replanning conversation (a reply cut off after steps started: asked again)."""
    return replanner_call(state, ctx, tools=tools, chat_models=chat_models)[1]


def _revision_round(start: Revising) -> dict[str, Any]:
    """Return what a revision's streaming round opens with: its version and kept steps, done."""
    return {
        "version": start.plan["version"] + 1,
        "kept": start.kept_steps,
        "records": start.records,
        "goal": start.plan["goal"],
        "failed": frozenset(signature(s) for s in start.lost_steps),
        "by": "replanner",
    }


def _drafting_parts(
    state: State,
    ctx: Context,
    counter: UsageCounter,
    tools: ToolRegistry,
    chat_models: models.ChatModels,
    start: Revising,
) -> dict[str, Any]:
    """Return the replanner's own parts of its :class:`DraftCall`.

    How to ask again, its update, and which revision may join the streaming round whole.
    """
    return {
        "again": partial(_conversation, state, ctx, tools=tools, chat_models=chat_models),
        "update": partial(revised, state, ctx, tools, start, counter=counter),
        "whole": partial(_whole, ctx=ctx, tools=tools, start=start),
    }


def _whole(draft: Draft, *, ctx: Context, tools: ToolRegistry, start: Revising) -> PlanDoc | None:
    """Return the revision the rest of whose steps may join the streaming round, else None.

    Only a valid first draft that the replanner's rules accept (:func:`revision_of`): a
    repaired one goes through the approval and the executor; a refused one ends the run.
    """
    if draft.plan is None or draft.attempts != 1:
        return None
    merged = revision_of(start, draft.plan, tools, ctx)
    return merged if not isinstance(merged, str) else None


def revision_of(
    start: Revising, revision: Plan, tools: ToolRegistry, ctx: Context
) -> PlanDoc | str:
    """Return the merged plan of a valid revision, or why the replanner refuses it."""
    plan, kept_steps, lost_steps = start.plan, start.kept_steps, start.lost_steps
    new_steps = revision.steps
    clash = sorted({s.id for s in new_steps} & start.kept_ids)
    failed_signatures = {signature(s) for s in lost_steps}
    if clash:
        return f"the replanner reused the ids of kept steps {clash}"
    if all(signature(s.model_dump()) in failed_signatures for s in new_steps):
        return "the replanner proposed the same failing steps again; stopping with a partial result"
    merged = Plan(goal=plan["goal"], steps=[*map(Step.model_validate, kept_steps), *new_steps])
    try:
        validate_plan(merged.model_dump(), tools, max_steps=ctx.max_steps + len(kept_steps))
    except PlanValidationError as exc:
        return "the revised plan is invalid: " + "; ".join(exc.errors)
    return to_doc(merged, version=plan["version"] + 1)


def revised(
    state: State,
    ctx: Context,
    tools: ToolRegistry,
    start: Revising,
    result: Draft,
    counter: UsageCounter,
) -> dict[str, Any]:
    """Return the state update for a revision: the merged plan, or why the run ends."""
    plan, records = start.plan, start.records
    kept_steps, lost_steps = start.kept_steps, start.lost_steps
    replans = state.get("replans", 0) + 1
    base: dict[str, Any] = {"replans": replans, "usage": counter.usage(), "feedback": None}
    base |= {"failure_answer": None, "reviewer_skipped": []}  # about the replaced plan
    if result.plan is None:
        return {
            **base,
            "error": "the replanner gave no valid revision: " + "; ".join(result.errors[:10]),
        }

    new_steps = result.plan.steps
    new_plan = revision_of(start, result.plan, tools, ctx)
    if isinstance(new_plan, str):
        return {**base, "error": new_plan}
    new_records: dict[str, StepRecord] = {
        record_key(s["id"]): records[record_key(s["id"])] for s in kept_steps
    }
    for step in new_steps:
        new_records[record_key(step.id)] = pending_record()
    failures = "; ".join(
        f"step {s['id']}: {records.get(record_key(s['id']), {}).get('error')}"
        for s in lost_steps
        if records.get(record_key(s["id"]), {}).get("status") == "failed"
    )
    return {
        **base,
        "plan": new_plan,
        "proposed": ProposedPlan(
            version=new_plan["version"],
            digest=plan_digest(new_plan),
            by="replanner",
            base=plan_digest(plan),
            added=[s.id for s in new_steps],
        ),
        "steps": new_records,
        "evaluation": None,
        "revisions": [
            Revision(
                version=plan["version"],
                reason=f"replanned after failures: {failures}",
                plan=plan,
                outcomes=dict(records),
            )
        ],
    }
