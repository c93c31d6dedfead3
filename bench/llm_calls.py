"""LLM calls and prompt tokens per task: planexec against the classic plan-and-execute loop.

The classic loop (LangGraph's plan-and-execute tutorial) calls the model again after every
step: an agent turn to call the step's tool, an agent turn to read its result, and a replan
turn over the plan and every result so far. Both run the same plan with real tools on the
example sales data; prompts are counted with the same estimator (4 characters a token, tool
schemas included wherever a model is given tools).
Run: python bench/llm_calls.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DEMO, new_config, table
from langgraph.checkpoint.memory import InMemorySaver

from planexec import (
    Context,
    Workspace,
    build_graph,
    default_registry,
    use_workspace,
)
from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.nodes.planner import planner_messages
from planexec.plan.references import resolve_references
from planexec.tools.sandbox import Sandbox


def plan_of_size(n: int) -> dict[str, Any]:
    plan = json.loads((DEMO / "sales_plan.json").read_text())
    if n == 6:
        return plan
    steps = plan["steps"][:2]
    columns = ["product", "region"]
    for i in range(3, n + 1):
        steps.append(
            {
                "id": i,
                "tool": "calculate_stats",
                "args": {
                    "dataset": "$2.dataset",
                    "value_column": "revenue",
                    "date_column": "date",
                    "period": "MQ"[i % 2],
                    "group_by": columns[i % 2],
                },
                "description": f"revenue statistics #{i}",
                "depends_on": [2],
                "expected_output": "totals and breakdown",
            }
        )
    return {"goal": f"{n}-step sales analysis", "steps": steps}


def workspace() -> str:
    ws = tempfile.mkdtemp(prefix="planexec-llm-")
    shutil.copy(DEMO / "sales.csv", ws)
    return ws


def tokens(text: str) -> int:
    return len(text) // 4


def classic_usage(plan: dict[str, Any]) -> tuple[int, int]:
    registry = default_registry()
    tool_schemas = tokens(registry.describe())
    ctx = Context(max_steps=40)
    folder = workspace()
    task = "Analyze sales.csv and write a trend report"
    planner_prompt = "\n".join(
        str(m.content) for m in planner_messages({"task": task}, ctx, registry, Workspace(folder))
    )
    calls, prompt = 1, tokens(planner_prompt)
    plan_text = "\n".join(f"{s['id']}. {s['description']}" for s in plan["steps"])
    past: list[str] = []
    outputs: dict[int, Any] = {}
    with use_workspace(folder):
        for step in plan["steps"]:
            ask = (
                f"For the following plan:\n{plan_text}\n\nYou are tasked with executing step "
                f"{step['id']}, {step['description']}."
            )
            call = json.dumps({"name": step["tool"], "args": step["args"]})
            result = registry.get(step["tool"]).invoke(resolve_references(step["args"], outputs))
            outputs[step["id"]] = result
            shown = json.dumps(result, default=str)
            calls += 2  # the agent calls the tool, then reads its result
            prompt += tool_schemas + tokens(ask)
            prompt += tool_schemas + tokens(ask + call + shown)
            past.append(f"Step {step['id']}: {step['description']}\nResult: {shown}")
            replan = (
                f"For the given objective, come up with a simple step by step plan.\n"
                f"Your objective was this: {task}\nYour original plan was this:\n"
                f"{plan_text}\nYou have currently done the follow steps:\n"
                + "\n".join(past)
                + "\nUpdate your plan accordingly."
            )
            calls += 1
            prompt += tokens(replan)
    return calls, prompt


def main() -> None:
    rows = []
    for n in (6, 30):
        plan = plan_of_size(n)
        ours_calls, ours_prompt = planexec_run(plan)
        classic_calls, classic_prompt = classic_usage(plan)
        rows.append(
            [
                n,
                ours_calls,
                classic_calls,
                f"{ours_prompt:,}",
                f"{classic_prompt:,}",
                f"{classic_prompt / ours_prompt:.1f}x",
            ]
        )
    print(
        table(
            "LLM calls and prompt tokens per task (all steps are tool steps, no failures)",
            [
                "steps",
                "planexec calls",
                "classic calls",
                "planexec prompt tok",
                "classic prompt tok",
                "classic / planexec",
            ],
            rows,
        )
    )


def planexec_run(plan: dict[str, Any]) -> tuple[int, int]:
    reply = ScriptedReply(tool_calls=[{"name": "Plan", "args": plan}])
    models.load_chat_model = lambda spec, *_: ScriptedChatModel(replies=[reply])
    sandbox = Sandbox.one_folder(workspace(), outputs=tempfile.mkdtemp(prefix="planexec-llm-out-"))
    graph = build_graph(checkpointer=InMemorySaver(), sandbox=sandbox, approval="never")
    ctx = Context(approval="never", planner_model="scripted", max_steps=40)
    config = new_config()
    out = graph.invoke({"task": "Analyze sales.csv and write a trend report"}, config, context=ctx)
    assert out["final"]["status"] == "succeeded", out["final"]
    usage = graph.get_state(config).values["usage"]
    return (sum(u["calls"] for u in usage.values()), sum(u["input_tokens"] for u in usage.values()))


if __name__ == "__main__":
    main()
