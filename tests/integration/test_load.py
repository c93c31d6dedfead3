"""Concurrent threads in one process: every run finishes with its own plan and results only."""

from __future__ import annotations

import asyncio
import time

import pytest
from langchain_core.tools import tool

from planexec import Context, Runs, new_run
from planexec.tools import ToolRegistry

RUNNING = {"now": 0, "most": 0}


@tool
async def wait(seconds: float) -> float:
    """Sleep for the given seconds (asynchronously); return them. Counts steps running at once."""
    RUNNING["now"] += 1
    RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
    try:
        if seconds:
            await asyncio.sleep(seconds)
    finally:
        RUNNING["now"] -= 1
    return seconds


TOOLS = ToolRegistry([wait])
CONTEXT = Context(approval="never", planner_model="scripted:none")


def plan_for(i: int) -> dict:
    """Two 50 ms steps in parallel, then one that depends on both and returns its own value."""

    def step(sid: int, seconds: float, after: list[int]) -> dict:
        args = {"seconds": seconds}
        return {
            "id": sid,
            "tool": "wait",
            "args": args,
            "description": f"thread {i} step {sid}",
            "depends_on": after,
        }

    steps = [step(1, 0.05, []), step(2, 0.05, []), step(3, 0.001 * (i % 10), [1, 2])]
    return {"goal": f"load thread {i}", "steps": steps}


async def one(runs: Runs, i: int) -> float:
    started = time.perf_counter()
    result = await runs.astart(new_run(plan=plan_for(i), context=CONTEXT, tools=TOOLS))
    took = time.perf_counter() - started
    assert result.status == "succeeded", result.values.get("final")
    thread = await runs.aget(result.thread_id)
    assert thread is not None and thread.values["task"] == f"load thread {i}", "state leaked"
    assert thread.values["steps"]["3"]["output"] == 0.001 * (i % 10), "result leaked"
    return took


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_fifty_concurrent_threads_finish_without_leaking(kind, tmp_path, request, monkeypatch):
    monkeypatch.setenv("PLANEXEC_WORKSPACE_ROOT", str(tmp_path / "root"))
    db = request.getfixturevalue("postgres_url") if kind == "postgres" else str(tmp_path / "l.db")

    async def go() -> list[float]:
        async with Runs.aopen(db, tools=TOOLS, approval="never") as runs:
            return await asyncio.gather(*(one(runs, i) for i in range(50)))

    RUNNING.update(now=0, most=0)
    latencies = asyncio.run(go())
    assert len(latencies) == 50
    # the threads ran together: one run has at most 2 steps at once, so more means overlap
    assert RUNNING["most"] > 2, RUNNING
