"""Plan memory: 30 tasks of 5 shapes, with and without memory, through one local model server.

A local OpenAI-compatible server (``tests/openai_server.py``, 300 ms + 2 ms per output token,
prompt tokens counted from each request) plays both models: the planner (priced as
openai:gpt-4.1, $2 / $8 per million tokens in / out) writes the right plan for each task, and
the cheap model (openai:gpt-4.1-mini, $0.40 / $1.60) adapts a remembered plan when asked. Each
task runs to its end (its plan approved at once, as a script would), one after another; with
memory the graph has an in-memory store, without it has none. Printed: planner calls, prompt
tokens, model cost, planning time (task given to plan shown for approval), runs succeeded; and
for each task memory adapted, its adaptation prompt's tokens next to the planner's prompt for
the same task (without memory), and their ratio: adapting must cost less than planning.
Run: python bench/plan_memory.py
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import DEMO, table
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

import planexec
from planexec import Context
from planexec.tools.sandbox import Sandbox
from tests.openai_server import Pace, Usage, serve, tool_call_message

PACE = Pace(first_token=0.3, per_token=0.002)
PRICES = {"bench-planner": (2.0, 8.0), "bench-cheap": (0.4, 1.6)}
WORKSPACE = "bench-memory"
FILES = [f"shop{i}.csv" for i in range(1, 7)]
COLUMNS = ["revenue", "quantity", "unit_price", "revenue", "quantity", "unit_price"]
SALES = json.loads((DEMO / "sales_plan.json").read_text())


def sales_plan(file: str, column: str) -> dict[str, Any]:
    text = json.dumps(SALES).replace("sales.csv", file).replace('"revenue"', json.dumps(column))
    return json.loads(text)


SHAPES: list[tuple[str, Any]] = [
    (r"Analyze (\S+) and chart (\S+) by month", sales_plan),
    (r"Please analyze (\S+) and chart its (\S+) by month", sales_plan),  # worded otherwise
    (
        r"Load (\S+) and report the (\S+) total",
        lambda f, c: {
            "goal": f"Report the {c} total of {f}",
            "steps": [
                {"load_csv": {"path": f}},
                {"calculate_stats": {"dataset": "$1.dataset", "value_column": c}},
                {"write_report": {"title": f"{c} total", "output_path": "total.md", "stats": "$2"}},
            ],
        },
    ),
    (
        r"List the files and write a note (\S+)",
        lambda n: {
            "goal": f"Write the file list to {n}",
            "steps": [
                {"list_files": {}},
                {"write_file": {"path": n, "content": "Files: $1.files"}},
            ],
        },
    ),
    (
        r"Copy (\S+) to (\S+)",
        lambda a, b: {
            "goal": f"Copy {a} to {b}",
            "steps": [
                {"read_file": {"path": a}},
                {"write_file": {"path": b, "content": "$1.content"}},
            ],
        },
    ),
    (
        r"Detect the trend of (\S+) in (\S+)",
        lambda c, f: {
            "goal": f"The trend of {c} in {f}",
            "steps": [{"detect_trends": {"dataset": f, "value_column": c, "date_column": "date"}}],
        },
    ),
]


def tasks() -> list[str]:
    """Six tasks of each of 5 kinds, interleaved (as a team's requests come in); two of the
    sales analyses are worded differently, so memory adapts a similar plan with a model."""
    out = []
    for i in range(6):
        file, column = FILES[i], COLUMNS[i]
        out += [
            f"Please analyze {file} and chart its {column} by month"
            if i >= 4  # a differently worded task: a similar template, adapted by a model
            else f"Analyze {file} and chart {column} by month",
            f"Load {file} and report the {column} total",
            f"List the files and write a note note{i}.md",
            f"Copy text{i}.txt to copy{i}.txt",
            f"Detect the trend of {column} in {file}",
        ]
    return out


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Both models: write the plan of the task the request asks about."""
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
    task = re.findall(r"Task: (.+)", text)[-1].strip()
    for pattern, make in SHAPES:
        found = re.fullmatch(pattern, task)
        if found:
            return tool_call_message("Plan", make(*found.groups()))
    return {"role": "assistant", "content": "Done."}


def workspace() -> None:
    """The files the tasks read: sales tables and small texts."""
    root = Sandbox.at().workspace_path(WORKSPACE, None)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for file in FILES:
        shutil.copy(DEMO / "sales.csv", root / file)
    for i in range(6):
        (root / f"text{i}.txt").write_text(f"text {i}\n")


ROLE_PRICES = {"planner": "bench-planner", "replanner": "bench-planner", "memory": "bench-cheap"}


PROMPTS: dict[tuple[bool, str, str], int] = {}
"""Prompt tokens per (memory on, task, role): the adaptation's next to planning's, per task."""


async def run_all(memory: bool) -> dict[str, float]:
    """Run every task; return planner calls, prompt tokens, cost, planning time, successes."""
    store = InMemoryStore() if memory else None
    graph = planexec.build_graph(checkpointer=InMemorySaver(), store=store)
    ctx = Context(
        planner_model="openai:bench-planner",
        executor_model="openai:bench-cheap",
        shared_folder=WORKSPACE,
        plan_memory=memory,
    )
    totals = {"planner calls": 0.0, "cheap calls": 0.0, "prompt tokens": 0.0, "cost": 0.0}
    totals |= {"planning": 0.0, "succeeded": 0.0}
    for task in tasks():
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        started = time.perf_counter()
        await graph.ainvoke({"task": task}, config, context=ctx)
        totals["planning"] += time.perf_counter() - started
        out = await graph.ainvoke(Command(resume={"action": "approve"}), config, context=ctx)
        totals["succeeded"] += out["final"]["status"] == "succeeded"
        for role, used in (out.get("usage") or {}).items():
            price_in, price_out = PRICES[ROLE_PRICES[role]]
            totals["cost"] += (
                used["input_tokens"] * price_in + used["output_tokens"] * price_out
            ) / 1e6
            totals["prompt tokens"] += used["input_tokens"]
            PROMPTS[(memory, task, role)] = used["input_tokens"]
            totals["planner calls" if role in ("planner", "replanner") else "cheap calls"] += used[
                "calls"
            ]
    return totals


async def main() -> None:
    """Run the tasks without memory, then with it, against one model server; print both."""
    workspace()
    usage = Usage(prompt_tokens=None, completion_tokens=None)
    with serve(reply, PACE, usage) as (url, _):
        os.environ.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="local-not-secret")
        without = await run_all(False)
        with_memory = await run_all(True)
    n = len(tasks())
    rows = [
        [name, f"{r['planner calls']:.0f}", f"{r['cheap calls']:.0f}", f"{r['prompt tokens']:,.0f}",
         f"${r['cost']:.4f}", f"{r['planning']:.2f}", f"{r['succeeded']:.0f}/{n}"]
        for name, r in (("without memory", without), ("with memory", with_memory))
    ]  # fmt: skip
    print(
        table(
            f"Plan memory: {n} tasks of 5 kinds (model at 300 ms + 2 ms a token)",
            ["run", "planner calls", "cheap calls", "prompt tokens", "model cost",
             "planning s", "succeeded"],
            rows,
        )
    )  # fmt: skip
    adapted = [task for (on, task, role) in PROMPTS if on and role == "memory"]
    for task in adapted:
        adapting, planning = PROMPTS[(True, task, "memory")], PROMPTS[(False, task, "planner")]
        print(
            f"similar path, {task!r}: adaptation prompt {adapting:,} tokens, planning prompt "
            f"{planning:,} tokens: ratio {adapting / planning:.2f}"
        )
    for task in (t for t in tasks() if t.startswith("Please") and t not in adapted):
        how = "planned fresh" if (True, task, "planner") in PROMPTS else "same shape, no call"
        print(f"worded otherwise, {task!r}: {how}")
    less_cost = 100 * (1 - with_memory["cost"] / without["cost"])
    less_time = 100 * (1 - with_memory["planning"] / without["planning"])
    print(
        f"plan memory: {less_cost:.0f}% less model cost, {less_time:.0f}% less planner time, "
        f"{with_memory['succeeded']:.0f}/{n} succeeded with memory, "
        f"{without['succeeded']:.0f}/{n} without"
    )


if __name__ == "__main__":
    asyncio.run(main())
