"""The planner sees the columns: sales-like tasks with renamed columns need no replan.

The scripted planner stands for a model that uses the columns when it is shown them: it
plans with the real names when they appear in its prompt (as the listing shows them now, or
as a failed step's error names them), else it guesses the usual ``date``/``revenue``.
"""

from __future__ import annotations

import re

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.nodes import planner as planner_node
from tests.helpers import plan_of, plan_reply, scripted, step, thread

VARIANTS = [
    ("order_date", "amount", "sku"),
    ("day", "sales", "item"),
    ("ts", "net_eur", "article"),
    ("Datum", "Umsatz", "Artikel"),
    ("when", "total", "product_code"),
]


def analysis(date: str, value: str, group: str) -> dict:
    return plan_of(
        step(
            1,
            "calculate_stats",
            {
                "dataset": "orders.csv",
                "value_column": value,
                "date_column": date,
                "group_by": group,
            },
        ),
        step(
            2,
            "detect_trends",
            {"dataset": "orders.csv", "value_column": value, "date_column": date},
        ),
    )


def names_only(workspace) -> str:
    """The listing as it was before: file names and sizes."""
    return "\n".join(
        f"- {workspace.relative(p)} ({p.stat().st_size} bytes)" for p in workspace.iter_files()
    )


def replans_needed(graph, use_models, ctx, workspace, variant) -> int:
    date, value, group = variant
    (workspace / "sales.csv").unlink(missing_ok=True)
    (workspace / "orders.csv").write_text(
        f"{date},{value},{group}\n"
        + "".join(f"2025-{m:02}-15,{100 + 10 * m},{'AB'[m % 2]}\n" for m in range(1, 13))
    )
    use_models(
        planner=scripted(
            plan_reply(analysis(*variant), match=re.escape(f'"{value}" number')),
            plan_reply(analysis(*variant), match=re.escape(f"columns: {date}, {value}, {group}")),
            plan_reply(analysis("date", "revenue", "product")),
        )
    )
    config = thread()
    out = graph.invoke({"task": "Analyse the sales in orders.csv"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert (out.get("final") or {}).get("status") == "succeeded", {
        k: out.get(k) for k in ("error", "steps", "__interrupt__")
    }
    return graph.get_state(config).values["replans"]


@pytest.mark.parametrize("listing", ["before", "after"])
def test_renamed_columns_need_a_replan_only_when_the_planner_is_blind(
    listing, use_models, ctx, workspace, monkeypatch
):
    if listing == "before":
        monkeypatch.setattr(planner_node, "workspace_files", names_only)
    graph = build_graph(checkpointer=InMemorySaver())
    counts = [replans_needed(graph, use_models, ctx, workspace, v) for v in VARIANTS]
    print(f"{listing}: {sum(c > 0 for c in counts)} of {len(counts)} tasks needed a replan")
    assert counts == ([1] * len(VARIANTS) if listing == "before" else [0] * len(VARIANTS))


def test_the_replanner_sees_the_profile_of_kept_steps(use_models, ctx, workspace):
    header = ",".join(f"column_number_{i:02}" for i in range(20))
    (workspace / "wide.csv").write_text(header + "\n" + ",".join("1" * 20) + "\n")
    failing = plan_of(
        step(1, "load_csv", {"path": "wide.csv"}),
        step(2, "calculate_stats", {"dataset": "$1.dataset", "value_column": "revenue"}, [1]),
    )
    fixed = plan_of(
        step(
            3, "calculate_stats", {"dataset": "$1.dataset", "value_column": "column_number_19"}, [1]
        ),
    )
    planner = use_models(planner=scripted(plan_reply(failing), plan_reply(fixed)))["planner"]
    graph = build_graph(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded", out["final"]
    kept = next(x for x in planner.prompts[1].splitlines() if x.startswith("- step 1 "))
    assert '"column_number_19": "int64"' in kept and len(kept) < 1400
