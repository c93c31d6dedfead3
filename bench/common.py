"""Shared pieces of the benchmarks: tools with controlled latency, DAGs, and timed runs."""

from __future__ import annotations

import asyncio
import atexit
import os
import random
import shutil
import tempfile
import time
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

import planexec
from planexec import Context
from planexec.runs import Runs, new_run
from planexec.tools import ToolRegistry

# every temp folder a benchmark makes (workspaces, databases) goes under one root, removed
# when the process ends; each benchmark thread works in its own folder below it
TEMP_ROOT = tempfile.mkdtemp(prefix="planexec-bench-")
tempfile.tempdir = TEMP_ROOT
atexit.register(shutil.rmtree, TEMP_ROOT, ignore_errors=True)
os.environ.setdefault("PLANEXEC_WORKSPACE_ROOT", tempfile.mkdtemp(prefix="workspaces-"))

# the data and recorded plan `planexec demo` runs: their one copy, in the package
DEMO = Path(str(resources.files("planexec") / "demo"))


def build_graph(**kwargs: Any) -> Any:
    """The planexec graph as benchmarks run it: they measure execution, not people, so as its
    operator they allow runs without approvals (each run's context asks for "never")."""
    return planexec.build_graph(approval="never", **kwargs)


@tool
async def wait(seconds: float) -> float:
    """Sleep for the given seconds (asynchronously); return them."""
    if seconds:
        await asyncio.sleep(seconds)
    return seconds


@tool
def wait_sync(seconds: float) -> float:
    """Sleep for the given seconds (blocking); return them."""
    if seconds:
        time.sleep(seconds)
    return seconds


TOOLS = ToolRegistry([wait, wait_sync])
LOOP_TOOLS = ToolRegistry([wait_sync])
LOOP_TOOLS.register(wait, runs_on_loop=True)
"""The same tools, ``wait`` marked to run on the steps' own loop (no worker thread per call)."""


def random_dag(
    n: int, seed: int, tool_name: str = "wait"
) -> tuple[dict[str, Any], dict[int, float]]:
    """Make a random DAG plan: 0-3 dependencies a step; 10-60 ms steps, 10% of 150-300 ms."""
    rng = random.Random(seed)
    steps, latency = [], {}
    for i in range(1, n + 1):
        lat = rng.uniform(0.15, 0.30) if rng.random() < 0.1 else rng.uniform(0.01, 0.06)
        latency[i] = round(lat, 4)
        window = list(range(max(1, i - 30), i))
        deps = sorted(rng.sample(window, k=min(len(window), rng.randint(0, 3))))
        steps.append(
            {
                "id": i,
                "tool": tool_name,
                "args": {"seconds": latency[i]},
                "description": f"step {i}",
                "depends_on": deps,
                "expected_output": "",
            }
        )
    return {"goal": f"random DAG of {n}", "steps": steps}, latency


def critical_path(plan: dict[str, Any], latency: dict[int, float]) -> float:
    """Length of the longest dependency chain: the lower bound on any executor's makespan."""
    finish: dict[int, float] = {}
    for step in plan["steps"]:
        finish[step["id"]] = latency[step["id"]] + max(
            (finish[d] for d in step["depends_on"]), default=0
        )
    return max(finish.values())


def levels(plan: dict[str, Any]) -> list[list[int]]:
    """Group steps by depth (what a superstep-per-level executor runs together)."""
    depth: dict[int, int] = {}
    for step in plan["steps"]:
        depth[step["id"]] = 1 + max((depth[d] for d in step["depends_on"]), default=-1)
    out: list[list[int]] = [[] for _ in range(max(depth.values()) + 1)]
    for sid, d in depth.items():
        out[d].append(sid)
    return out


def context(**overrides: Any) -> Context:
    base: dict[str, Any] = dict(
        approval="never",
        max_steps=5000,
        max_parallel_steps=5000,
        planner_model="scripted:none",
    )
    base.update(overrides)
    return Context(**base)


def seed(graph: Any, plan: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Start a thread holding ``plan`` as if the planner had made it (no model call); return
    its config. Seeding is the runs API's (as `planexec run --plan` does); the config keeps
    only the thread id, so the timed runs save what they did before."""
    config = runs_on(graph).seed(new_run(plan=plan, context=ctx, tools=TOOLS))
    return {"configurable": config["configurable"]}


async def aseed(graph: Any, plan: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Async :func:`seed`."""
    config = await runs_on(graph).aseed(new_run(plan=plan, context=ctx, tools=TOOLS))
    return {"configurable": config["configurable"]}


def runs_on(graph: Any) -> Runs:
    """The runs API on a benchmark graph's checkpointer, with the benchmark tools."""
    return Runs(graph.checkpointer, tools=TOOLS, approval="never")


def new_config() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def step_span(values: dict[str, Any]) -> float:
    """Executor makespan: first step start to last step end."""
    recs = [r for r in values["steps"].values() if r.get("started_at")]
    return max(r["ended_at"] for r in recs) - min(r["started_at"] for r in recs)


def table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]

    def line(row: list[Any]) -> str:
        return "| " + " | ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=False)) + " |"

    out = [f"\n{title}", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


__all__ = [
    "LOOP_TOOLS",
    "TOOLS",
    "aseed",
    "build_graph",
    "context",
    "critical_path",
    "levels",
    "new_config",
    "random_dag",
    "runs_on",
    "seed",
    "step_span",
    "table",
]
