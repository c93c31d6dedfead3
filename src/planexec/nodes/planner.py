"""Planner node: the planner model turns the task (and any reviewer feedback) into a valid plan."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from planexec.context import ApprovalPolicy, Context, context_of
from planexec.drafting import Draft, Drafting, draft_plan, drafting
from planexec.execution.streaming import (
    draft_call,
    drafted_and_ran,
    opening_of,
    round_args,
    started_before,
)
from planexec.llm import models, prompts
from planexec.llm.usage import UsageCounter
from planexec.memory.recall import FromMemory, adaptation, filled_plan, origin_of, recall
from planexec.nodes.executor import step_task
from planexec.plan import goal_of_task, to_doc
from planexec.plan.doc import plan_digest
from planexec.plan.records import pending_record, record_key
from planexec.review.policy import effective_policy
from planexec.spending.budget import Budget, BudgetExhausted, run_budget, spending, stopped
from planexec.state import ProposedPlan, Revision, State
from planexec.tools.listing import MAX_LISTED_FILES as MAX_LISTED_FILES  # re-exported
from planexec.tools.listing import workspace_files
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox
from planexec.tools.workspace import Workspace


def planner_messages(
    state: State, ctx: Context, tools: ToolRegistry, workspace: Workspace
) -> list[BaseMessage]:
    """Build the planner's conversation: rules and tools, the task, any rejected plan."""
    messages: list[BaseMessage] = [
        SystemMessage(
            prompts.PLANNER_SYSTEM.format(max_steps=ctx.max_steps, tools=tools.describe())
        ),
        HumanMessage(
            prompts.PLANNER_TASK.format(task=state["task"], files=workspace_files(workspace))
        ),
    ]
    previous, feedback = state.get("plan"), state.get("feedback")
    if previous and feedback:
        shown = json.dumps({"goal": previous["goal"], "steps": previous["steps"]}, indent=1)
        messages.append(
            HumanMessage(prompts.PLANNER_REJECTED.format(plan=shown, feedback=feedback))
        )
    return messages


def planner_call(
    state: State,
    ctx: Context,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: models.ChatModels,
) -> tuple[BaseChatModel, Drafting]:
    """Return the planner's model and its drafting conversation (reads the workspace)."""
    conversation = _conversation(state, ctx, tools=tools, sandbox=sandbox)
    return chat_models.for_role("planner", ctx), conversation


def _conversation(state: State, ctx: Context, *, tools: ToolRegistry, sandbox: Sandbox) -> Drafting:
    """Return a new drafting conversation for the task (reads the workspace)."""
    return drafting(
        planner_messages(state, ctx, tools, sandbox.for_run(ctx)),
        tools,
        max_steps=ctx.max_steps,
        max_repairs=ctx.max_plan_repairs,
        goal=goal_of_task(state["task"]),
    )


async def plan(
    state: State,
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: models.ChatModels,
    operator_policy: ApprovalPolicy = "first",
    sync_run: bool = False,
) -> dict[str, Any]:
    """Ask the planner model for a plan; invalid drafts are repaired (bounded).

    Plan memory comes first: a template of the task's shape gives the plan with no model call,
    a similar one is adapted by the cheap model (:mod:`planexec.memory.recall`).

    When no one approves plans (the stricter of ``operator_policy`` and the run's is
    ``never``), the plan's steps start while the model writes it
    (:mod:`planexec.execution.streaming`), and the first round runs here. A resumed planner
    run whose earlier attempt finished steps that way streams its plan again to find them
    (:func:`planexec.execution.streaming.started_before`): they are replayed and recorded,
    never run twice, and under a policy that asks a human nothing else starts before the
    approval. Plan memory is not used then (it would plan without them). ``sync_run``: a sync
    run (``invoke``) runs this on planexec's background loop.
    """
    runtime = get_runtime(Context)
    ctx = context_of(runtime.context)
    policy = effective_policy(operator_policy, ctx.approval)
    # steps an earlier attempt of this run finished, as the plan streamed
    finished = await started_before(config, sync_run=sync_run)
    budget = run_budget(state, ctx)
    found = (
        None if finished else await asyncio.to_thread(recall, state, ctx, runtime.store)
    )  # the store may block
    if found is not None:
        remembered = filled_plan(found, tools, ctx)
        memory_counter = UsageCounter("memory")
        adapting = None if remembered else adaptation(found, state["task"], tools, ctx)
        if adapting is not None:
            model = await asyncio.to_thread(chat_models.for_role, "executor", ctx)
            config = memory_counter.config(models.internal_call("plan memory model"))
            try:
                with spending(budget):
                    draft = await draft_plan(model, adapting, config)
            except BudgetExhausted as exc:
                return stopped(exc.stop, budget, memory_counter)
            except Exception:  # memory never fails a run: the planner plans
                draft = Draft(plan=None, errors=[])
            if draft.plan is not None:
                remembered = FromMemory(draft.plan, origin_of(found, draft.plan))
        if remembered is not None:
            return remembered_update(state, remembered, memory_counter, budget)
    counter = UsageCounter("planner")
    model, conversation = await asyncio.to_thread(  # lists the workspace, may load a model
        partial(planner_call, tools=tools, sandbox=sandbox, chat_models=chat_models), state, ctx
    )
    shared = round_args(ctx, budget, tools, sandbox, chat_models, sync_run=sync_run)
    call_step = step_task(sync_run)
    opening = opening_of(policy, finished, call_step, version=_next_version(state), **shared)
    parts = _drafting_parts(state, ctx, counter, tools, sandbox)
    call = draft_call("planner", model, conversation, budget, counter, **parts)
    return await drafted_and_ran(state, config, opening, call)


def _next_version(state: State) -> int:
    """Return the version number of the plan the planner writes next."""
    previous = state.get("plan")
    return previous["version"] + 1 if previous else 1


def _drafting_parts(
    state: State, ctx: Context, counter: UsageCounter, tools: ToolRegistry, sandbox: Sandbox
) -> dict[str, Any]:
    """Return the planner's own parts of its :class:`DraftCall`: how to ask again, its update."""
    return {
        "again": partial(_conversation, state, ctx, tools=tools, sandbox=sandbox),
        "update": partial(planned, state, counter=counter),
    }


def remembered_update(
    state: State, remembered: FromMemory, counter: UsageCounter, budget: Budget
) -> dict[str, Any]:
    """Return the state update of a plan memory made: a new plan, shown for approval."""
    update = planned(state, Draft(plan=remembered.plan, errors=[]), counter)
    update["proposed"] = {**update["proposed"], "by": "memory"}
    return {**update, "plan_origin": remembered.origin, "busy_seconds": budget.elapsed()}


def planned(state: State, result: Draft, counter: UsageCounter) -> dict[str, Any]:
    """Return the state update for the planner's draft: the new plan, or why there is none."""
    if result.plan is None:
        return {
            "error": "the planner gave no valid plan in "
            + (f"{result.attempts} attempts: " if result.attempts != 1 else "1 attempt: ")
            + "; ".join(result.errors[:10]),
            "planning_errors": result.errors,
            "usage": counter.usage(),
        }
    previous = state.get("plan")
    doc = to_doc(result.plan, version=(previous["version"] + 1) if previous else 1)
    update: dict[str, Any] = {
        "plan": doc,
        "proposed": ProposedPlan(version=doc["version"], digest=plan_digest(doc), by="planner"),
        "steps": {record_key(s.id): pending_record() for s in result.plan.steps},
        # a plan from the planner starts a new approval: nothing approved before carries over
        "approved": None,
        "approval": None,
        "feedback": None,
        "planning_errors": [],
        "error": None,
        "evaluation": None,
        "final": None,
        "replans": 0,
        "failure_answer": None,
        "plan_origin": None,
        "failure_asks": {},
        "reviewer_skipped": [],
        "usage": counter.usage(),
    }
    if previous:
        update["revisions"] = [
            Revision(
                version=previous["version"],
                reason=replaced_because(state),
                plan=previous,
                outcomes=dict(state.get("steps") or {}),
            )
        ]
    return update


def replaced_because(state: State) -> str:
    """Say truthfully why the planner replaces the previous plan."""
    if (state.get("approval") or {}).get("action") == "reject" and state.get("feedback"):
        return f"rejected by the reviewer: {state.get('feedback')}"
    return f"a new task was given: {state['task']}"
