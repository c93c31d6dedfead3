"""Executor node: run every pending step of the approved plan as durable LangGraph tasks.

Each step starts as soon as its own dependencies have succeeded; a resumed run never runs
a finished step again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.func import task
from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.errors import PlanNotApprovedError
from planexec.plan import current_records, plan_digest, step_digest, topological_order
from planexec.runner import (
    DependencyGate,
    ExecutionRound,
    outcome,
    run_step_async,
    run_step_blocking,
    running,
)
from planexec.sandbox import Sandbox
from planexec.state import (
    ApprovalRecord,
    RoleUsage,
    State,
    StepDoc,
    StepRecord,
    add_usage,
)
from planexec.store_guard import CheckpointStoreError, StoreGuard
from planexec.tools.registry import ToolRegistry


def _run_step(step: StepDoc) -> dict[str, Any]:
    """Durable task: one step of the plan (sync runs).

    Its argument is its trace input and shows in the ``debug``/``tasks`` streams: the step
    only; the round (tools, context, secrets) comes from the node through ``runner.running``.
    """
    return run_step_blocking(step)


async def _arun_step(step: StepDoc) -> dict[str, Any]:
    """Durable task: one step of the plan (async runs); takes only the step, like ``run_step``."""
    return await run_step_async(step)


# One task name for both: a task's id comes from its name, so a run started with ``ainvoke``
# (or on the server) and resumed with ``invoke`` finds the results its steps saved, and back.
_run_step.__name__ = _arun_step.__name__ = "run_step"
run_step = task(_run_step)
arun_step = task(_arun_step)


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


def _prepare(
    state: State,
    config: RunnableConfig,
    tools: ToolRegistry,
    sandbox: Sandbox,
    *,
    asynchronous: bool,
) -> tuple[ExecutionRound, list[StepDoc]]:
    ctx: Context = context_of(get_runtime(Context).context)
    plan = state["plan"]
    assert plan is not None, "the executor needs an approved plan"
    records = current_records(plan, state.get("steps") or {})
    finished = {
        int(sid): {**rec, "id": int(sid)}
        for sid, rec in records.items()
        if rec.get("status") in ("succeeded", "failed", "skipped")
    }
    run_id = str(config.get("configurable", {}).get("thread_id", "run"))
    round_ = ExecutionRound(
        plan=plan,
        tools=tools,
        context=ctx,
        workspace=sandbox.for_run(ctx, config),
        outputs=sandbox.output_store(),
        run_id=run_id,
        gate=DependencyGate(finished),
        store=StoreGuard.of(config, asynchronous=asynchronous),
    )
    to_run = [
        s for s in topological_order(plan["steps"]) if records[str(s["id"])]["status"] == "pending"
    ]
    return round_, to_run


def _publisher(round_: ExecutionRound, step: StepDoc) -> Any:
    """Publish a task's outcome when its future resolves.

    A live task publishes from its own body already; this callback matters on replay, where a
    finished task's result comes back from the checkpoint without its body running. It must
    never raise (a callback's exception is swallowed and dependents would wait forever): any
    problem becomes a failed outcome, and the node raises it after every task has ended.
    """

    def publish(fut: Future[Any] | asyncio.Future[Any]) -> None:
        try:
            result = _result(fut, step)
        except Exception as exc:  # noqa: BLE001 - re-raised by the node, see above
            result = outcome(step["id"], "failed", error=f"internal error: {exc}")
        round_.gate.publish(step["id"], result)

    return publish


def _result(fut: Future[Any] | asyncio.Future[Any], step: StepDoc) -> dict[str, Any]:
    exc = fut.exception()
    if exc is not None:
        return outcome(step["id"], "failed", error=f"internal error: {exc!r}")
    result: dict[str, Any] = fut.result()
    if result.get("id") != step["id"]:
        raise RuntimeError(
            f"replayed result of step {result.get('id')} came back for step {step['id']}"
        )
    return result


def _update(state: State, results: list[dict[str, Any]]) -> dict[str, Any]:
    plan = state["plan"]
    assert plan is not None
    steps = {s["id"]: s for s in plan["steps"]}
    records = current_records(plan, state.get("steps") or {})
    usage: dict[str, RoleUsage] = {}
    for res in results:
        usage = add_usage(usage, res.get("usage"))
        before = (state.get("steps") or {}).get(str(res["id"]), {})  # as the evaluator left it
        records[str(res["id"])] = StepRecord(
            step_digest=step_digest(steps[res["id"]], plan["goal"]),
            status=res["status"],
            attempts=res["attempts"],
            started_at=res["started_at"],
            ended_at=res["ended_at"],
            summary=res["summary"],
            output=res["output"],
            error=res["error"],
        )
        if res.get("output_file") is not None:
            records[str(res["id"])]["output_file"] = res["output_file"]
        if res.get("refused_calls"):
            records[str(res["id"])]["refused_calls"] = res["refused_calls"]
        if before.get("judged_retry"):  # the evaluator's bound on judge retries lives here
            records[str(res["id"])]["judged_retry"] = True
    return {"steps": records, "usage": usage, "evaluation": None}


def execute(
    state: State, config: RunnableConfig, *, tools: ToolRegistry, sandbox: Sandbox
) -> dict[str, Any]:
    """Run the pending steps (sync callers: ``graph.invoke``)."""
    if problem := approval_problem(state):
        return _refusal(state, problem)
    round_, to_run = _prepare(state, config, tools, sandbox, asynchronous=False)
    try:
        with running(round_):  # the tasks' context: they take only their step as argument
            futures = [run_step(step) for step in to_run]  # plan order: stable task ids
            for step, fut in zip(to_run, futures, strict=True):
                fut.add_done_callback(_publisher(round_, step))
            concurrent.futures.wait(futures)
    finally:
        round_.close()
    if to_run:
        with contextlib.suppress(CheckpointStoreError):
            round_.store.check_blocking()  # did the store fail after the last step started?
    _raise_store_failure(round_, to_run, futures)
    return _update(state, [_result(f, s) for s, f in zip(to_run, futures, strict=True)])


async def aexecute(
    state: State, config: RunnableConfig, *, tools: ToolRegistry, sandbox: Sandbox
) -> dict[str, Any]:
    """Run the pending steps (async callers: ``graph.ainvoke``, the LangGraph server)."""
    if problem := approval_problem(state):
        return _refusal(state, problem)
    round_, to_run = await asyncio.to_thread(  # touches the disk
        _prepare, state, config, tools, sandbox, asynchronous=True
    )
    with running(round_):  # the tasks' context: they take only their step as argument
        futures = [arun_step(step) for step in to_run]  # plan order: stable task ids
        for step, fut in zip(to_run, futures, strict=True):
            fut.add_done_callback(_publisher(round_, step))
        await asyncio.gather(*futures, return_exceptions=True)
    if to_run:
        with contextlib.suppress(CheckpointStoreError):
            await round_.store.check()  # did the store fail after the last step started?
    _raise_store_failure(round_, to_run, futures)
    return _update(state, [_result(f, s) for s, f in zip(to_run, futures, strict=True)])


def _raise_store_failure(
    round_: ExecutionRound,
    to_run: list[StepDoc],
    futures: Sequence[Future[Any] | asyncio.Future[Any]],
) -> None:
    """Stop the run if the checkpoint store failed during the round, saying what it means.

    Raising (instead of returning the round's records) leaves the thread at its last saved
    checkpoint; a resume re-runs exactly the steps whose results were not saved.
    """
    failure = round_.store.failure
    if failure is None:
        return
    finished: list[str] = []
    not_started: list[str] = []
    for step, fut in zip(to_run, futures, strict=True):
        ended = fut.done() and not fut.cancelled() and fut.exception() is None
        (finished if ended else not_started).append(str(step["id"]))
    raise CheckpointStoreError(
        f"{failure}, so no step was started after that"
        + (f" (not started: {', '.join(not_started)})" if not_started else "")
        + ". Resume the thread when the store is back: steps whose results were saved are not"
        " run again"
        + (
            f"; steps that ended during this round ({', '.join(finished)}) run again if their "
            "results were not saved"
            if finished
            else ""
        )
        + "."
    ) from None
