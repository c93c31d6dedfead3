"""Charts and reports an analyst would sign: aggregated, labelled, cleaning and anomalies told."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd

from planexec.tools.data import (
    calculate_stats,
    clean_data,
    detect_trends,
    generate_chart,
    write_report,
)
from planexec.tools.workspace import use_workspace


def sales(tmp_path, rows: int = 20_000, crash: bool = True) -> list[Decimal]:
    """A year of sales rising month by month; December collapses when ``crash``."""
    months = [1 + i % 12 for i in range(rows)]
    values = [Decimal(100 + 10 * m) if not (crash and m == 12) else Decimal(20) for m in months]
    pd.DataFrame(
        {
            "id": range(rows),
            "date": [f"2025-{m:02}-{1 + i % 28:02}" for i, m in enumerate(months)],
            "revenue": [f"${v:,.2f}" for v in values],
        }
    ).to_csv(tmp_path / "s.csv", index=False)
    return values


def test_a_chart_of_many_rows_is_aggregated_per_month(tmp_path):
    sales(tmp_path)
    with use_workspace(tmp_path):
        out = generate_chart.invoke(
            {"kind": "line", "x": "date", "y": "revenue", "title": "Revenue", "dataset": "s.csv"}
        )
    assert out == {
        "path": "chart.png",
        "kind": "line",
        "points": 12,
        "x_label": "date (month)",
        "y_label": "revenue (USD)",  # the currency written in the data
        "aggregated": "sum per month",
    }
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"


def test_last_month_anomaly_is_reported_with_the_trend_without_it(tmp_path):
    values = sales(tmp_path)
    with use_workspace(tmp_path):
        (tmp_path / "s.csv").write_text(
            (tmp_path / "s.csv").read_text()
            + "x,2025-03-01,$5.00\n"
            + "\n".join(["y,,$7.00", "y,,$7.00"])
            + "\n"
        )
        cleaning = clean_data.invoke({"dataset": "s.csv", "required_columns": ["date"]})
        stats = calculate_stats.invoke(
            {"dataset": cleaning["dataset"], "value_column": "revenue", "date_column": "date"}
        )
        trends = detect_trends.invoke(
            {"dataset": cleaning["dataset"], "value_column": "revenue", "date_column": "date"}
        )
        chart = generate_chart.invoke(
            {
                "kind": "bar",
                "x": "period",
                "y": "value",
                "title": "Monthly revenue",
                "data": stats["by_period"],
                "unit": "USD",
                "output_path": "out/chart.png",
            }
        )
        write_report.invoke(
            {
                "title": "Sales",
                "output_path": "out/report.md",
                "stats": stats,
                "trends": trends,
                "cleaning": cleaning,
                "chart_path": chart["path"],
            }
        )
    assert trends["anomalies"][-1]["period"] == "2025-12"
    assert trends["without_last"]["direction"] == "up"
    report = (tmp_path / "out" / "report.md").read_text()
    assert "The last period (2025-12) is an anomaly; without it the trend is **up**" in report
    total = sum(values) + 5
    assert f"| total | {total:,.2f} |" in report and "## Key figures (revenue, USD)" in report
    assert "| 1 | duplicate rows (same values in every column) |" in report
    assert "| 1 | no value in 'date' |" in report
    assert "20,001 kept" in report
