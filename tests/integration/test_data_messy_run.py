"""The recorded sales plan, run on a European export of the same sales, reports the same numbers."""

from __future__ import annotations

import pandas as pd
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from tests.helpers import DEMO, plan_reply, sales_plan, scripted, thread


def european(frame: pd.DataFrame) -> pd.DataFrame:
    """Day-first dates, amounts like "1.234,50 €", padded product names."""
    out = frame.copy()
    out["date"] = pd.to_datetime(out["date"]).dt.strftime("%d/%m/%Y")
    out["revenue"] = out["revenue"].map(
        lambda v: "" if pd.isna(v) else f"{v:,.2f} €".translate(str.maketrans(",.", ".,"))
    )
    out["product"] = " " + out["product"] + "  "
    return out


def test_the_sales_plan_reads_a_european_export_right(use_models, ctx, workspace):
    raw = pd.read_csv(DEMO / "sales.csv")
    european(raw).to_csv(workspace / "sales.csv", sep=";", index=False, encoding="cp1252")
    use_models(planner=scripted(plan_reply(sales_plan())))
    graph = build_graph(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"task": "Analyze sales.csv"}, config, context=ctx())
    result = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert result["final"]["status"] == "succeeded", result["final"]

    clean = raw.drop_duplicates(subset=["transaction_id"]).dropna(subset=["date", "revenue"])
    monthly = clean.groupby(pd.to_datetime(clean["date"]).dt.to_period("M"))["revenue"].sum()
    report = (workspace / "output" / "report.md").read_text()
    assert f"| total | {clean['revenue'].sum():,.2f} |" in report
    assert f"| rows | {len(clean):,} |" in report
    for period, value in monthly.items():
        assert f"| {period} | {value:,.2f} |" in report
    for product, value in clean.groupby("product")["revenue"].sum().items():
        assert f"| {product} | {value:,.2f} |" in report
    assert "## Key figures (revenue, EUR)" in report and "Direction: **up**" in report
