"""Load: many concurrent threads in one process, each with its own plan; all must finish with
their own results only. Prints throughput and p50/p95 run latency for SQLite and Postgres.

Run: python bench/load.py [THREADS]   (default 200)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import TOOLS, aseed, build_graph, context, table

from planexec.storage.persistence import async_postgres_saver, async_sqlite_saver


def plan_for(i: int) -> dict[str, Any]:
    """Three steps: two 50 ms steps in parallel, then one that depends on both."""
    steps = [
        {
            "id": 1,
            "tool": "wait",
            "args": {"seconds": 0.05},
            "description": f"thread {i} a",
            "depends_on": [],
            "expected_output": "",
        },
        {
            "id": 2,
            "tool": "wait",
            "args": {"seconds": 0.05},
            "description": f"thread {i} b",
            "depends_on": [],
            "expected_output": "",
        },
        {
            "id": 3,
            "tool": "wait",
            "args": {"seconds": 0.001 * (i % 10)},
            "description": "join",
            "depends_on": [1, 2],
            "expected_output": "",
        },
    ]
    return {"goal": f"load thread {i}", "steps": steps}


async def one(graph: Any, i: int) -> float:
    ctx = context()
    config = await aseed(graph, plan_for(i), ctx)
    started = time.perf_counter()
    out = await graph.ainvoke(None, config, context=ctx)
    took = time.perf_counter() - started
    assert out["final"]["status"] == "succeeded", out["final"]
    values = (await graph.aget_state(config)).values
    assert values["task"] == f"load thread {i}", "state leaked across threads"
    assert values["steps"]["3"]["output"] == 0.001 * (i % 10), "result leaked across threads"
    return took


async def run_load(saver: Any, threads: int) -> tuple[float, float, float]:
    graph = build_graph(checkpointer=saver, tools=TOOLS)
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one(graph, i) for i in range(threads)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return threads / wall, statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


async def main(threads: int) -> None:
    rows = []
    with ExitStack() as stack:
        async with AsyncExitStack() as astack:
            savers = [
                (
                    "SQLite",
                    await astack.enter_async_context(
                        async_sqlite_saver(Path(tempfile.mkdtemp()) / "load.db")
                    ),
                )
            ]
            try:
                from tests.servers import postgres

                url = stack.enter_context(postgres())
                savers.append(
                    ("Postgres", await astack.enter_async_context(async_postgres_saver(url)))
                )
            except Exception as exc:  # the table says Postgres is missing
                print(f"(Postgres skipped: {exc})")
            for name, saver in savers:
                rate, p50, p95 = await run_load(saver, threads)
                rows.append([name, threads, f"{rate:.1f}", f"{p50:.2f}", f"{p95:.2f}"])
    print(
        table(
            f"{threads} concurrent runs in one process (3 steps each, 50 ms steps)",
            ["saver", "threads", "runs/s", "p50 s", "p95 s"],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
