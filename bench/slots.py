"""How many steps at once: makespan against the critical path with 4, 8, 16 slots and no limit.

30-step random DAGs (``common.random_dag``: 10-60 ms steps, 10% of 150-300 ms), async, in-memory
saver; the steps' tool records when it really started and ended, so the table shows the wait
between a step's last dependency ending and the step starting (slot waits included), and the
executor's makespan (first start to last end) against the critical path. "plan order" gives
slots to ready steps by plan position (what first-come slots amount to), "longest chain" is
planexec's rule. Best of 3 runs per DAG, 5 DAGs.
Run: python bench/slots.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import build_graph, context, critical_path, random_dag, table
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from planexec.execution import round as execution_round
from planexec.runs import Runs, new_run
from planexec.tools import ToolRegistry


@tool
async def timed(seconds: float) -> dict[str, float]:
    """Sleep for the given seconds; return when it started and ended."""
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    return {"start": start, "end": time.perf_counter()}


TOOLS = ToolRegistry([timed])


def by_plan_order(steps: list[Any], tools: ToolRegistry) -> dict[int, tuple[float, int]]:
    """Ranks that ignore chains: ready steps get slots in plan order."""
    return {s["id"]: (0.0, i) for i, s in enumerate(steps)}


async def one_run(plan: dict[str, Any], slots: int) -> tuple[float, list[float]]:
    """Run the plan; return (makespan, waits after the last dependency ended)."""
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    ctx = context(max_parallel_steps=slots)
    runs = Runs(graph.checkpointer, tools=TOOLS, approval="never")
    config = await runs.aseed(new_run(plan=plan, context=ctx, tools=TOOLS))
    out = await graph.ainvoke(None, config, context=ctx)
    assert out["final"]["status"] == "succeeded", out["final"]
    times = {int(k): v["output"] for k, v in out["steps"].items()}
    waits = [
        times[s["id"]]["start"] - max(times[d]["end"] for d in s["depends_on"])
        for s in plan["steps"]
        if s["depends_on"]
    ]
    span = max(t["end"] for t in times.values()) - min(t["start"] for t in times.values())
    return span, waits


async def main() -> None:
    rows = []
    dags = [random_dag(30, seed=seed, tool_name="timed") for seed in range(30, 35)]
    chains = execution_round.chain_ranks
    for rule, ranks in (("plan order", by_plan_order), ("longest chain", chains)):
        execution_round.chain_ranks = ranks  # type: ignore[assignment]
        for slots in (4, 8, 16, 5000):
            ratios, waits = [], []
            for plan, latency in dags:
                runs = [await one_run(plan, slots) for _ in range(3)]
                span, dag_waits = min(runs, key=lambda r: r[0])
                ratios.append(span / critical_path(plan, latency))
                waits += dag_waits
            rows.append(
                [
                    rule,
                    "no limit" if slots == 5000 else slots,
                    f"{statistics.median(ratios):.2f}x",
                    f"{max(ratios):.2f}x",
                    f"{1000 * statistics.median(waits):.1f}",
                    f"{1000 * statistics.quantiles(waits, n=10)[-1]:.1f}",
                ]
            )
    execution_round.chain_ranks = chains
    print(
        table(
            "30-step DAGs: makespan / critical path, and waits after a dependency ends (ms)",
            ["slots given", "max_parallel_steps", "median", "worst", "wait p50", "wait p90"],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
