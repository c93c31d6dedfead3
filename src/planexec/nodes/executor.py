"""Executor node: run every pending step of the approved plan as durable LangGraph tasks.

Each step starts as soon as its own dependencies have succeeded; a resumed run never runs
a finished step again. How a step runs is the execution layer's (:mod:`planexec.execution`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config, var_child_runnable_config
from langgraph.func import task
from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.errors import PlanNotApprovedError
from planexec.execution import (
    ExecutionRound,
    StepFuture,
    all_ended,
    event_writer,
    open_round,
    publisher,
    round_outcomes,
    round_usage,
    run_step_async,
    run_step_blocking,
    running,
)
from planexec.execution.speculation import adopt, spilled_files, where_of
from planexec.llm.models import ChatModels
from planexec.plan.doc import plan_digest, plan_of
from planexec.plan.records import records_after
from planexec.state import ApprovalRecord, State, StepDoc, StepOutcome
from planexec.storage.store_guard import CheckpointStoreError
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox


def _run_step(step: StepDoc) -> StepOutcome:
    """Durable task: one step of the plan (sync runs).

    Its argument is its trace input and shows in the ``debug``/``tasks`` streams: the step
    only; the round (tools, context, secrets) comes from the node through ``running``.
    """
    return run_step_blocking(step)


async def _arun_step(step: StepDoc) -> StepOutcome:
    """Durable task: one step of the plan (async runs); takes only the step, like ``run_step``."""
    return await run_step_async(step)


# One task name for both: a task's id comes from its name, so a run started with ``ainvoke``
# (or on the server) and resumed with ``invoke`` finds the results its steps saved, and back.
_run_step.__name__ = _arun_step.__name__ = "run_step"
run_step = task(_run_step)
arun_step = task(_arun_step)


def _speculative_step(step: StepDoc) -> StepOutcome:
    """Durable task: a step run while its plan awaits approval (sync runs; the speculator's).

    The same body as ``run_step`` under another name, so every stream (updates, tasks,
    debug) and trace tells its result from an approved plan's.
    """
    return run_step_blocking(step)


async def _aspeculative_step(step: StepDoc) -> StepOutcome:
    """Durable task: :func:`_speculative_step` for async runs (the same task name)."""
    return await run_step_async(step)


_speculative_step.__name__ = _aspeculative_step.__name__ = "speculative_step"
speculative_step = task(_speculative_step)
aspeculative_step = task(_aspeculative_step)


def step_task(sync_run: bool, *, speculative: bool = False) -> Callable[[StepDoc, int], StepFuture]:
    """Return the one way a run calls a step's durable task: ``call(step, plan_version)``.

    ``run_step`` on sync runs, else ``arun_step`` (LangGraph runs a sync run's tasks on its
    threads, an async run's on its loop; both bodies run the same step:
    :func:`run_step_async`), always called through :func:`tagged_call`, so that every step's
    run is tagged with its step, whoever starts it (the executor, or the planner and
    replanner while the plan streams). ``speculative``: the speculator's steps, run while
    their plan awaits approval: the task ``speculative_step``, tagged ``planexec:speculative``.
    """
    if speculative:
        chosen = speculative_step if sync_run else aspeculative_step
    else:
        chosen = run_step if sync_run else arun_step
    return partial(tagged_call, chosen, speculative=speculative)


def tagged_call(
    call: Callable[[StepDoc], StepFuture],
    step: StepDoc,
    plan_version: int,
    *,
    speculative: bool = False,
) -> StepFuture:
    """Call a step's durable task so that its run is tagged with the step.

    LangGraph starts a task's run under the callbacks of the config it is called in: called
    with the node's callbacks plus the tag ``planexec:step:N`` and the metadata
    ``planexec_step`` and ``planexec_plan_version`` (what the step's tool or model runs carry),
    the ``run_step`` run, whose output is the step's record, is found by its step. The task's
    name, and so its id, is unchanged: a resumed run still finds the results saved before.
    """
    config = var_child_runnable_config.get()
    callbacks = (config or {}).get("callbacks")
    if config is None or not isinstance(callbacks, BaseCallbackManager):
        return call(step)
    tagged = callbacks.copy()
    tagged.add_tags([f"planexec:step:{step['id']}"])
    tagged.add_metadata({"planexec_step": step["id"], "planexec_plan_version": plan_version})
    if speculative:  # ran before its plan was approved: its result counts only if adopted
        tagged.add_tags(["planexec:speculative"])
        tagged.add_metadata({"planexec_speculative": True})
    token = var_child_runnable_config.set(patch_config(config, callbacks=tagged))
    try:
        return call(step)
    finally:
        var_child_runnable_config.reset(token)


def approval_problem(state: State) -> str | None:
    """Say why the plan in state may not run (None when it is exactly the approved plan).

    This is the one check between a plan and its execution: the approval node is the only
    writer of ``approved`` (state edits cannot write it), and a plan runs only if its content
    digest and version are the ones approved.
    """
    plan, approved = state.get("plan"), state.get("approved")
    if plan is None:
        return "there is no plan to run"
    digest = plan_digest(plan)
    if not approved:
        return f"plan version {plan.get('version')} (digest {digest}) has not been approved"
    if approved["digest"] != digest or approved["version"] != plan.get("version"):
        return (
            f"the plan in state (version {plan.get('version')}, digest {digest}) is not the "
            f"approved plan (version {approved['version']}, digest {approved['digest']})"
        )
    return None


def _refusal(state: State, problem: str) -> dict[str, Any]:
    """Send the plan back to approval: nothing runs, and the reason is shown to the reviewer."""
    plan = state.get("plan")
    error = PlanNotApprovedError(f"{problem}; nothing ran. Approve this plan to run it.")
    return {
        "approval": ApprovalRecord(
            action="not_approved",
            version=plan["version"] if plan else 0,
            digest=plan_digest(plan) if plan else "",
            error=f"{type(error).__name__}: {error}",
        ),
        "approved": None,
    }


async def execute(
    state: State,
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: ChatModels,
    sync_run: bool = False,
) -> dict[str, Any]:
    """Run the pending steps (every run: a sync one runs this on planexec's background loop).

    ``sync_run`` says which durable step task to call (:func:`step_task`) and how to reach the
    checkpoint store (through its sync or async API).
    """
    if problem := approval_problem(state):
        return _refusal(state, problem)
    speculated = state.get("speculated")
    if speculated:  # results of steps that ran while the plan awaited approval
        ctx = context_of(get_runtime(Context).context)
        state = await asyncio.to_thread(taken_over, state, sandbox, ctx, config)  # the disk
    round_, to_run = await asyncio.to_thread(  # touches the disk
        partial(open_round, chat_models=chat_models),
        state,
        config,
        tools=tools,
        sandbox=sandbox,
        asynchronous=not sync_run,
    )
    call = step_task(sync_run)
    version = round_.plan["version"]
    with running(round_):  # the tasks' context: they take only their step as argument
        futures = [call(step, version) for step in to_run]  # plan order: stable ids
        for step, fut in zip(to_run, futures, strict=True):
            fut.add_done_callback(publisher(round_.gate, step))
        await all_ended(futures, round_)  # if the run is stopped, so are its steps
    if to_run:
        with contextlib.suppress(CheckpointStoreError):
            await round_.store.check()  # did the store fail after the last step started?
    update = _update(state, round_outcomes(round_, to_run, futures), round_)
    return {**update, "speculated": None} if speculated else update


def taken_over(state: State, sandbox: Sandbox, ctx: Context, config: RunnableConfig) -> State:
    """Return ``state`` with the approved plan's own speculative results as its step records.

    :func:`planexec.execution.speculation.adopt` decides which count (the same step, the same
    inputs, the same workspace and executor model, whatever this run's own wish to
    speculate: an answer sent without the run's context, as Studio sends one, loses
    nothing); a result whose spilled output file is gone (removed on another
    branch of a fork) does not count either. The others are discarded with their spilled
    files, and a ``speculation_adopted`` event names both.
    """
    plan, speculated = plan_of(state), state.get("speculated") or {}
    store = sandbox.output_store()
    usable = {
        sid: found
        for sid, found in speculated.items()
        if "output_file" not in found["record"] or store.has(found["record"]["output_file"])
    }
    where = where_of(sandbox.for_run(ctx, config).root, ctx.executor_model)
    records, adopted = adopt(plan, state.get("steps") or {}, usable, where)
    for ref in spilled_files(speculated, keep=adopted):
        store.discard(ref)
    discarded = sorted(int(sid) for sid in speculated if int(sid) not in adopted)
    write = event_writer()
    if write is not None:
        write({"event": "speculation_adopted", "steps": adopted, "discarded": discarded})
    return {**state, "steps": records}


def _update(state: State, outcomes: list[StepOutcome], round_: ExecutionRound) -> dict[str, Any]:
    """Return the state update of a round: its steps' records, usage and working time."""
    plan = plan_of(state)
    records = records_after(plan, state.get("steps") or {}, outcomes)
    update = {"steps": records, "usage": round_usage(outcomes), "evaluation": None}
    if round_.budget is not None:
        update["busy_seconds"] = round_.budget.elapsed()
    return update
