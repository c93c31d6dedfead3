from __future__ import annotations

import pandas as pd
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from tests.helpers import plan_reply, sales_plan, scripted, thread


def test_sales_plan_runs_to_a_report(use_models, ctx, workspace):
    planner = scripted(plan_reply(sales_plan()))
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver())
    config = thread()

    first = graph.invoke(
        {"task": "Analyze sales.csv and write a trend report"}, config, context=ctx()
    )
    [pending] = first["__interrupt__"]
    assert pending.value["type"] == "plan_approval"
    assert [s["tool"] for s in pending.value["plan"]["steps"]][:2] == ["load_csv", "clean_data"]
    assert graph.get_state(config).next == ("approval",)

    result = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert result["final"]["status"] == "succeeded", result["final"]
    assert all(r["status"] == "succeeded" for r in result["steps"].values())
    assert (workspace / "output" / "report.md").exists()
    assert (workspace / "output" / "revenue_trend.png").read_bytes()[:4] == b"\x89PNG"
    assert "output/report.md" in result["final"]["artifacts"]
    assert len(planner.prompts) == 1  # one LLM call for the whole 6-step plan
    state = graph.get_state(config).values
    assert state["usage"]["planner"]["calls"] == 1
    assert set(state["usage"]) == {"planner"}
    raw = pd.read_csv(workspace / "sales.csv")
    report = (workspace / "output" / "report.md").read_text()
    assert "Sales trend report 2025" in report
    assert len(raw) == 3060
