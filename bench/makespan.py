"""Executor makespan against the critical path, a level-by-level and a sequential baseline.

Run: python bench/makespan.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    TOOLS,
    aseed,
    build_graph,
    context,
    critical_path,
    levels,
    random_dag,
    step_span,
    table,
)
from langgraph.checkpoint.memory import InMemorySaver


async def planexec_makespan(plan, ctx) -> tuple[float, float]:
    """Return (executor makespan: first step start to last step end, whole graph run)."""
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = await aseed(graph, plan, ctx)
    started = time.perf_counter()
    out = await graph.ainvoke(None, config, context=ctx)
    whole = time.perf_counter() - started
    assert out["final"]["status"] == "succeeded", out["final"]
    return step_span(out), whole


async def level_by_level(plan, latency) -> float:
    started = time.perf_counter()
    for level in levels(plan):
        await asyncio.gather(*(asyncio.sleep(latency[s]) for s in level))
    return time.perf_counter() - started


def sequential(latency) -> float:
    return sum(latency.values())  # one step after another: the sum (not slept, it is exact)


async def main() -> None:
    rows = []
    for n in (20, 200, 1000):
        plan, latency = random_dag(n, seed=n)
        cp = critical_path(plan, latency)
        ours, whole = await planexec_makespan(plan, context())
        barrier = await level_by_level(plan, latency)
        seq = sequential(latency)
        rows.append(
            [
                n,
                f"{cp:.2f}",
                f"{ours:.2f}",
                f"{ours / cp:.3f}x",
                f"{whole / cp:.3f}x",
                f"{barrier / cp:.3f}x",
                f"{seq / cp:.1f}x",
            ]
        )
    print(
        table(
            "Makespan / critical path (async, in-memory saver; random DAGs, "
            "10-60 ms steps, 10% 150-300 ms)",
            [
                "steps",
                "critical path s",
                "executor s",
                "executor",
                "whole run",
                "level-by-level",
                "sequential",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
