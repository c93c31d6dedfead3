"""planexec's per-step overhead against the LangGraph floor, in one process.

The floor is a bare LangGraph graph whose one node makes the same number of ``@task`` calls
(all started at once, as planexec's executor does) with the same saver: each task returns at
once ("bare"), or calls the same zero-latency LangChain tool a planexec step calls ("tool":
what a step cannot avoid, the tool's own invocation and callbacks).
Both are measured as marginal cost: (time of a 220-step run - time of a 20-step run) / 200,
best of 7 (fixed per-run costs cancel out; noise on a shared machine only adds time).
planexec runs each tool call on a worker thread of its own by default (a tool that blocks stalls
only itself), or on the steps' loop for a tool registered ``runs_on_loop=True``; the "hop"
column is the difference, in units of the "@task + tool call" floor.
``--cpu`` measures the process's CPU time (all threads) instead of wall time. ``--calls``
counts Python function calls per step instead (async, in-memory; the event loop's thread, plus
for planexec its tool calls' worker threads, each job profiled on its own): a measure that
does not move with the machine's load (tests/integration/test_step_overhead.py bounds it).
Run: python bench/floor.py [--cpu | --calls]
"""

from __future__ import annotations

import asyncio
import cProfile
import operator
import pstats
import sys
import threading
import time
import uuid
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead
from common import LOOP_TOOLS, TOOLS, build_graph, context, table, wait, wait_sync
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import task
from langgraph.graph import StateGraph
from overhead import RUNS, SIZES, async_ms, marginal_ms, prepare, sync_ms, tmp_db
from typing_extensions import TypedDict

from planexec.concurrency import workers
from planexec.storage.persistence import async_sqlite_saver, sqlite_saver


class FloorState(TypedDict, total=False):
    n: int
    results: Annotated[list[float], operator.add]


@task
def noop_step(i: int) -> float:
    """One zero-latency step (sync runs)."""
    return 0.0


@task
async def anoop_step(i: int) -> float:
    """One zero-latency step (async runs)."""
    return 0.0


@task
def tool_step(i: int) -> float:
    """One zero-latency tool call (sync runs)."""
    return float(wait_sync.invoke({"seconds": 0}))


@task
async def atool_step(i: int) -> float:
    """One zero-latency tool call (async runs), the tool planexec's bench steps call."""
    return float(await wait.ainvoke({"seconds": 0}))


def steps_node(step: Any) -> Any:
    def run_steps(state: FloorState) -> dict[str, Any]:
        futures = [step(i) for i in range(state["n"])]
        return {"results": [f.result() for f in futures]}

    return run_steps


def asteps_node(step: Any) -> Any:
    async def arun_steps(state: FloorState) -> dict[str, Any]:
        return {"results": list(await asyncio.gather(*(step(i) for i in range(state["n"]))))}

    return arun_steps


def floor_graph(node: Any, saver: Any) -> Any:
    builder = StateGraph(FloorState)
    builder.add_node("steps", node)
    builder.set_entry_point("steps")
    return builder.compile(checkpointer=saver)


def config() -> Any:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def floor_sync_ms(saver: Any, step: Any) -> float:
    graph = floor_graph(steps_node(step), saver)

    def timed(n: int) -> float:
        started = overhead.CLOCK()
        assert len(graph.invoke({"n": n}, config())["results"]) == n
        return overhead.CLOCK() - started

    return marginal_ms({n: min(timed(n) for _ in range(RUNS)) for n in SIZES})


async def floor_async_ms(saver: Any, step: Any) -> float:
    graph = floor_graph(asteps_node(step), saver)

    async def timed(n: int) -> float:
        started = overhead.CLOCK()
        assert len((await graph.ainvoke({"n": n}, config()))["results"]) == n
        return overhead.CLOCK() - started

    return marginal_ms({n: min([await timed(n) for _ in range(RUNS)]) for n in SIZES})


class WorkerCalls:
    """Python function calls made on planexec's tool worker threads (each job profiled alone)."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        submit, tidy = workers.Worker.submit, workers.Worker._tidy
        workers.Worker.submit = lambda worker, job: submit(worker, self.wrap(job))  # type: ignore[method-assign]
        workers.Worker._tidy = self.wrap(tidy)  # type: ignore[method-assign]

    def wrap(self, fn: Any) -> Any:
        def profiled(worker: Any) -> Any:
            profile = cProfile.Profile()
            profile.enable()
            try:
                return fn(worker)
            finally:
                profile.disable()
                with self.lock:
                    self.calls += pstats.Stats(profile).total_calls  # type: ignore[attr-defined]

        return profiled


async def calls_per_step(run: Any, worker_calls: WorkerCalls) -> float:
    """Marginal Python function calls per step of ``run(n)`` (cProfile: this thread, workers)."""
    counted = {}
    for n in SIZES:
        await run(n)  # warm: imports and caches are not per step
        worker_calls.calls = 0
        profile = cProfile.Profile()
        profile.enable()
        await run(n)
        profile.disable()
        counted[n] = pstats.Stats(profile).total_calls + worker_calls.calls  # type: ignore[attr-defined]
    small, large = SIZES
    return (counted[large] - counted[small]) / (large - small)


async def count_calls() -> None:
    """Print function calls per step: planexec against both floors."""
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    counted = WorkerCalls()  # profiles the workers from here on: counting runs only

    on_loop = build_graph(checkpointer=InMemorySaver(), tools=LOOP_TOOLS)

    async def ours(n: int) -> None:
        task, config, _ = prepare(n)
        await graph.ainvoke(task, config, context=context(max_parallel_steps=8))

    async def ours_on_loop(n: int) -> None:
        task, config, _ = prepare(n)
        await on_loop.ainvoke(task, config, context=context(max_parallel_steps=8))

    def floor_run(step: Any) -> Any:
        floor = floor_graph(asteps_node(step), InMemorySaver())

        async def run(n: int) -> None:
            await floor.ainvoke({"n": n}, config())

        return run

    rows = [
        ["planexec", f"{await calls_per_step(ours, counted):.0f}"],
        ["planexec, tool on loop", f"{await calls_per_step(ours_on_loop, counted):.0f}"],
        ["bare @task", f"{await calls_per_step(floor_run(anoop_step), counted):.0f}"],
        ["@task + tool call", f"{await calls_per_step(floor_run(atool_step), counted):.0f}"],
    ]
    print(
        table(
            "Python function calls per step (async, in-memory, all threads)",
            ["graph", "calls"],
            rows,
        )
    )


def row(name: str, call: str, ours: float, on_loop: float, bare: float, tool: float) -> list[str]:
    """One line of the table: planexec's ms/step (both ways of calling the tool), the floors'.

    "hop" is what the worker thread of the default costs a step (planexec - tool on loop), in
    units of the floor: with the default, the ratio cannot be below 1 + hop.
    """
    return [
        name,
        call,
        f"{ours:.2f}",
        f"{ours / tool:.2f}x",
        f"{on_loop:.2f}",
        f"{on_loop / tool:.2f}x",
        f"{(ours - on_loop) / tool:.2f}x",
        f"{bare:.2f}",
        f"{tool:.2f}",
    ]


async def main() -> None:
    """Print planexec's ms/step, isolated and on the loop, against both floors, per saver."""
    rows: list[list[str]] = []
    with ExitStack() as stack:
        async with AsyncExitStack() as astack:
            savers = {
                "in-memory": (InMemorySaver, InMemorySaver),
                "SQLite (planexec.storage.persistence)": (
                    lambda: stack.enter_context(sqlite_saver(tmp_db("s.db"))),
                    None,
                ),
            }
            for name, (make_sync, make_async) in savers.items():
                ours, on_loop = sync_ms(make_sync()), sync_ms(make_sync(), LOOP_TOOLS)
                bare, tool = (
                    floor_sync_ms(make_sync(), noop_step),
                    floor_sync_ms(make_sync(), tool_step),
                )
                rows.append(row(name, "invoke", ours, on_loop, bare, tool))
                if make_async is None:
                    made = [
                        await astack.enter_async_context(async_sqlite_saver(tmp_db(f"{i}.db")))
                        for i in range(4)
                    ]
                else:
                    made = [make_async() for _ in range(4)]
                ours = await async_ms(made[0])
                on_loop = await async_ms(made[3], LOOP_TOOLS)
                bare = await floor_async_ms(made[1], anoop_step)
                tool = await floor_async_ms(made[2], atool_step)
                rows.append(row(name, "ainvoke", ours, on_loop, bare, tool))
    print(
        table(
            "Overhead per step against the LangGraph floor (ms/step, zero-latency steps, "
            + ("CPU time)" if overhead.CLOCK is time.process_time else "wall time)")
            + "; ratios to @task + tool call",
            [
                "saver",
                "call",
                "planexec",
                "ratio",
                "tool on loop",
                "ratio",
                "hop",
                "bare @task",
                "@task + tool call",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    if "--cpu" in sys.argv:
        overhead.CLOCK = time.process_time
    asyncio.run(count_calls() if "--calls" in sys.argv else main())
