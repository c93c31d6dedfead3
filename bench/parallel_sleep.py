"""Independent sleeping steps: executor wall time against the longest step (sync and async).

Run: python bench/parallel_sleep.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TOOLS, aseed, build_graph, context, seed, step_span, table
from langgraph.checkpoint.memory import InMemorySaver

SLEEPS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]


def plan(tool: str) -> dict:
    return {
        "goal": "sleep",
        "steps": [
            {
                "id": i,
                "tool": tool,
                "args": {"seconds": s},
                "description": f"sleep {s}s",
                "depends_on": [],
                "expected_output": "",
            }
            for i, s in enumerate(SLEEPS, 1)
        ],
    }


def main() -> None:
    rows = []
    ctx = context(max_parallel_steps=len(SLEEPS))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = seed(graph, plan("wait_sync"), ctx)
    span = step_span(graph.invoke(None, config, context=ctx))
    rows.append(
        ["invoke, blocking tool", f"{span:.3f}", f"{span / max(SLEEPS):.3f}x", f"{sum(SLEEPS):.1f}"]
    )

    async def run_async() -> float:
        config = await aseed(graph, plan("wait"), ctx)
        return step_span(await graph.ainvoke(None, config, context=ctx))

    span = asyncio.run(run_async())
    rows.append(
        ["ainvoke, async tool", f"{span:.3f}", f"{span / max(SLEEPS):.3f}x", f"{sum(SLEEPS):.1f}"]
    )
    print(
        table(
            f"{len(SLEEPS)} independent steps sleeping {SLEEPS[0]}-{SLEEPS[-1]} s",
            ["mode", "executor wall s", "vs longest step", "sequential s"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
