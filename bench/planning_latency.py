"""Planning latency with a model as slow as a real one: plan tokens, first tool, wall time.

A local OpenAI-compatible server (``tests/openai_server.py``) streams at 300 ms + 10 ms per
output token (tokens: o200k_base if bpe-openai is installed, else 4 characters a token). The
planner writes the sales plan (6 steps, the data tools on the shipped sales.csv) or a 30-step
random DAG (``wait`` steps of 10-60 ms, 10% of 150-300 ms), each in the full format (goal, ids,
dependencies, descriptions written out) and in the compact one the planner is now asked for
(no goal: the task states it; ``{"wait": 0.0245}``: a tool's one required argument bare).
The model writes the plan's JSON two ways: with a space after ``,`` and ``:`` (as Python's
json.dumps does) and without spaces (as OpenAI's current models write tool arguments, e.g.
``{"location":"Paris"}``); the same plan costs fewer tokens without. For approval ``never``
and ``first`` (approved at once, as a script would), it prints: the plan's output tokens, time
to the first step shown (the first ``plan_step`` event, as the plan streams), time to the
first tool call (the first ``step_started`` event), and wall time to the final result; then
planexec's per-step overhead against the LangGraph floor (``bench/floor.py``).
Run: python bench/planning_latency.py
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import floor
from common import DEMO, random_dag, table, wait, wait_sync
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import planexec
from planexec import Context
from planexec.plan import to_doc, validate_plan
from planexec.tools import ToolRegistry, default_registry
from planexec.tools.sandbox import Sandbox
from tests.openai_server import Pace, count_tokens, serve, tool_call_message

PACE = Pace(first_token=0.3, per_token=0.01)
WORKSPACE = "bench-latency"


def registry() -> ToolRegistry:
    """The data tools and the benchmark's ``wait`` tools."""
    tools = default_registry()
    for item in (wait, wait_sync):
        tools.register(item, side_effects=False)
    return tools


def full(plan: dict[str, Any], tools: ToolRegistry) -> dict[str, Any]:
    """The plan in the full format, every field written out (as state stores it)."""
    doc = to_doc(validate_plan(plan, tools, max_steps=100), version=1)
    return {"goal": doc["goal"], "steps": doc["steps"]}


SPACED, UNSPACED = (", ", ": "), (",", ":")
JSON_STYLES = {"spaced": SPACED, "unspaced": UNSPACED}


def compact_dag(plan: dict[str, Any]) -> dict[str, Any]:
    """A DAG of ``wait`` steps in the compact format: no reference carries a dependency here."""
    steps = [
        {
            s["tool"]: s["args"]["seconds"],
            **({"depends_on": s["depends_on"]} if s["depends_on"] else {}),
        }
        for s in plan["steps"]
    ]
    return {"steps": steps}


def workloads(tools: ToolRegistry) -> dict[str, tuple[str, dict[str, dict[str, Any]]]]:
    """Each workload's task and its plan, by format (the compact plan states no goal)."""
    sales = json.loads((DEMO / "sales_plan.json").read_text())
    dag, _ = random_dag(30, seed=30)
    return {
        "sales (6 steps)": (
            sales["goal"],
            {"full": full(sales, tools), "compact": {"steps": sales["steps"]}},
        ),
        "30-step DAG": (dag["goal"], {"full": full(dag, tools), "compact": compact_dag(dag)}),
    }


def answer(plan: dict[str, Any], separators: tuple[str, str] = SPACED) -> Any:
    """The model: the planner writes ``plan``; anything else gets one sentence."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice["function"]["name"] == "Plan":
            return tool_call_message("Plan", plan, separators)
        return {"role": "assistant", "content": "Done."}

    return reply


async def timed_run(
    graph: Any, approval: str, task: str
) -> tuple[float, float, float, dict[str, Any]]:
    """Run a task to its end; return seconds to the first step shown (a ``plan_step``
    event), to the first tool call (a ``step_started`` event), wall seconds, and the result."""
    ctx = Context(
        planner_model="openai:bench-planner",
        executor_model="openai:bench-executor",
        shared_folder=WORKSPACE,
        approval=approval,  # type: ignore[arg-type]
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    started, first_shown, first_tool = time.perf_counter(), float("nan"), float("nan")
    command: Any = {"task": task}
    while True:
        async for mode, chunk in graph.astream(
            command, config, context=ctx, stream_mode=["custom", "updates"]
        ):
            event = chunk.get("event") if mode == "custom" else None
            if event == "plan_step" and first_shown != first_shown:  # NaN: not seen yet
                first_shown = time.perf_counter() - started
            if event == "step_started" and first_tool != first_tool:
                first_tool = time.perf_counter() - started
        state = await graph.aget_state(config)
        if not state.interrupts:
            return first_shown, first_tool, time.perf_counter() - started, state.values
        command = Command(resume={"action": "approve"})  # approved at once, as a script would


def sales_workspace() -> None:
    """Put sales.csv in the run's workspace (the sales plan reads it)."""
    root = Sandbox.at().workspace_path(WORKSPACE, None)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEMO / "sales.csv", root / "sales.csv")


async def main() -> None:
    tools = registry()
    sales_workspace()
    graph = planexec.build_graph(checkpointer=InMemorySaver(), tools=tools, approval="never")
    rows = []
    task, formats = workloads(tools)["sales (6 steps)"]
    with serve(answer(formats["compact"])) as (url, _):  # imports, pandas: not part of a run
        os.environ.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="local-not-secret")
        await timed_run(graph, "never", task)
    for workload, (task, formats) in workloads(tools).items():
        for (name, plan), (style, separators) in itertools.product(
            formats.items(), JSON_STYLES.items()
        ):
            tokens = count_tokens(json.dumps(plan, separators=separators))
            with serve(answer(plan, separators), PACE) as (url, _):
                os.environ.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="local-not-secret")
                for approval in ("never", "first"):
                    first_shown, first_tool, wall, values = await timed_run(graph, approval, task)
                    status = values["final"]["status"]
                    rows.append(
                        [
                            workload,
                            name,
                            style,
                            approval,
                            tokens,
                            f"{tokens / len(plan['steps']):.1f}",
                            "-" if first_shown != first_shown else f"{first_shown:.2f}",
                            f"{first_tool:.2f}",
                            f"{wall:.2f}",
                            status,
                        ]
                    )
    print(
        table(
            "Planning latency, model at 300 ms + 10 ms per output token (seconds)",
            [
                "workload",
                "plan format",
                "model's JSON",
                "approval",
                "plan tokens",
                "tokens/step",
                "first step shown",
                "first tool",
                "wall",
                "result",
            ],
            rows,
        )
    )
    await floor.main()  # the same process: planexec's overhead against the LangGraph floor


if __name__ == "__main__":
    asyncio.run(main())
