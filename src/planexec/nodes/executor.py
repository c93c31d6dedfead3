"""Executor node: run every pending step of the approved plan as durable LangGraph tasks.

Each step starts as soon as its own dependencies have succeeded; a resumed run never runs
a finished step again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from concurrent.futures import Future
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.func import task
from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.plan import topological_order
from planexec.runner import (
    DependencyGate,
    ExecutionRound,
    outcome,
    run_step_async,
    run_step_blocking,
)
from planexec.state import RoleUsage, State, StepDoc, StepRecord, add_usage
from planexec.tools.registry import ToolRegistry
from planexec.tools.workspace import Workspace


@task
def run_step(step: StepDoc, round_: ExecutionRound) -> dict[str, Any]:
    """Durable task: one step of the plan (sync runs)."""
    return run_step_blocking(step, round_)


@task
async def arun_step(step: StepDoc, round_: ExecutionRound) -> dict[str, Any]:
    """Durable task: one step of the plan (async runs)."""
    return await run_step_async(step, round_)


def _prepare(
    state: State, config: RunnableConfig, tools: ToolRegistry
) -> tuple[ExecutionRound, list[StepDoc]]:
    ctx: Context = context_of(get_runtime(Context).context)
    plan = state["plan"]
    assert plan is not None, "the executor needs an approved plan"
    if state.get("approved_version") != plan["version"]:
        raise PermissionError(
            f"plan version {plan['version']} was not approved; refusing to run it"
        )
    records = state.get("steps", {})
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
        workspace=Workspace(ctx.workspace),
        run_id=run_id,
        gate=DependencyGate(finished),
        allowed_tools=sorted({s["tool"] for s in plan["steps"] if s["tool"]}),
    )
    to_run = [
        s
        for s in topological_order(plan["steps"])
        if records.get(str(s["id"]), {}).get("status", "pending") == "pending"
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
    records: dict[str, StepRecord] = dict(state.get("steps", {}))
    usage: dict[str, RoleUsage] = {}
    for res in results:
        usage = add_usage(usage, res.get("usage"))
        before = records.get(str(res["id"]), {})
        records[str(res["id"])] = StepRecord(
            status=res["status"],
            attempts=res["attempts"],
            started_at=res["started_at"],
            ended_at=res["ended_at"],
            summary=res["summary"],
            output=res["output"],
            error=res["error"],
        )
        if before.get("judged_retry"):  # the evaluator's bound on judge retries lives here
            records[str(res["id"])]["judged_retry"] = True
    return {"steps": records, "usage": usage, "evaluation": None}


def execute(state: State, config: RunnableConfig, *, tools: ToolRegistry) -> dict[str, Any]:
    """Run the pending steps (sync callers: ``graph.invoke``)."""
    round_, to_run = _prepare(state, config, tools)
    futures = [run_step(step, round_) for step in to_run]  # plan order: stable task ids
    for step, fut in zip(to_run, futures, strict=True):
        fut.add_done_callback(_publisher(round_, step))
    try:
        concurrent.futures.wait(futures)
    finally:
        round_.close()
    return _update(state, [_result(f, s) for s, f in zip(to_run, futures, strict=True)])


async def aexecute(state: State, config: RunnableConfig, *, tools: ToolRegistry) -> dict[str, Any]:
    """Run the pending steps (async callers: ``graph.ainvoke``, the LangGraph server)."""
    round_, to_run = await asyncio.to_thread(_prepare, state, config, tools)  # touches the disk
    futures = [arun_step(step, round_) for step in to_run]  # plan order: stable task ids
    for step, fut in zip(to_run, futures, strict=True):
        fut.add_done_callback(_publisher(round_, step))
    await asyncio.gather(*futures, return_exceptions=True)
    return _update(state, [_result(f, s) for s, f in zip(to_run, futures, strict=True)])
