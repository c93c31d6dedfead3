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


def test_stats_and_trends_read_only_the_columns_they_use(tmp_path, monkeypatch):
    sales(tmp_path, rows=500)
    read: list[object] = []
    real_csv, real_parquet = pd.read_csv, pd.read_parquet
    monkeypatch.setattr(
        pd, "read_csv", lambda *a, **k: read.append(k.get("usecols")) or real_csv(*a, **k)
    )
    monkeypatch.setattr(
        pd, "read_parquet", lambda *a, **k: read.append(k.get("columns")) or real_parquet(*a, **k)
    )
    with use_workspace(tmp_path):
        calculate_stats.invoke(
            {"dataset": "s.csv", "value_column": "revenue", "date_column": "date"}
        )
        detect_trends.invoke({"dataset": "s.csv", "value_column": "revenue", "date_column": "date"})
        cleaned = clean_data.invoke({"dataset": "s.csv"})
        read.clear()  # clean_data reads every column: it writes them all
        calculate_stats.invoke({"dataset": cleaned["dataset"], "value_column": "revenue"})
    assert read == [["revenue"]]  # the cleaned Parquet: one column of three
    read.clear()
    with use_workspace(tmp_path):
        calculate_stats.invoke(
            {"dataset": "s.csv", "value_column": "revenue", "date_column": "date"}
        )
        detect_trends.invoke({"dataset": "s.csv", "value_column": "revenue", "date_column": "date"})
    assert read == [["revenue", "date"], ["revenue", "date"]]  # never "id"


def drawn(monkeypatch) -> list:
    """Keep each figure generate_chart saves, to look at its axes."""
    from matplotlib.figure import Figure

    figures: list = []
    real = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda self, *a, **k: figures.append(self) or real(self, *a, **k)
    )
    return figures


def test_a_bar_chart_starts_at_zero_with_currency_and_thousands(tmp_path, monkeypatch):
    figures = drawn(monkeypatch)
    rows = [{"period": f"2025-{m:02}", "value": 50_000 + 1_000 * m} for m in range(1, 13)]
    with use_workspace(tmp_path):
        out = generate_chart.invoke(
            {"kind": "bar", "x": "period", "y": "value", "title": "t", "data": rows, "unit": "USD"}
        )
    ax = figures[0].axes[0]
    assert ax.get_ylim()[0] == 0  # not 51,000: bars are lengths
    assert (
        (ax.get_xlabel(), ax.get_ylabel())
        == ("period", "value (USD)")
        == (out["x_label"], out["y_label"])
    )
    assert ax.yaxis.get_major_formatter()(60_000, 0) == "$60,000"


def test_a_line_chart_marks_anomalies_and_draws_the_trend_without_a_last_one(tmp_path, monkeypatch):
    figures = drawn(monkeypatch)
    sales(tmp_path)  # December collapses
    with use_workspace(tmp_path):
        generate_chart.invoke(
            {"kind": "line", "x": "date", "y": "revenue", "title": "t", "dataset": "s.csv"}
        )
    ax = figures[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["revenue", "trend without 2025-12 (up)", "anomaly"], labels
    trend = next(line for line in ax.get_lines() if line.get_linestyle() == "--")
    x, y = trend.get_data()
    assert list(x) == list(range(11))  # fitted on January..November, where it holds
    assert y[-1] > y[0]
    ringed = ax.collections[0].get_offsets()
    assert [int(p[0]) for p in ringed] == [11]  # December ringed


def test_a_few_dated_rows_are_drawn_in_time_order(tmp_path, monkeypatch):
    figures = drawn(monkeypatch)
    days = [f"2025-{m:02}-15" for m in (3, 1, 12, 2, 7)]
    pd.DataFrame({"day": days, "revenue": [3, 1, 12, 2, 7]}).to_csv(tmp_path / "s.csv", index=False)
    with use_workspace(tmp_path):
        cleaned = clean_data.invoke({"dataset": "s.csv", "date_columns": ["day"]})
        for dataset in ("s.csv", cleaned["dataset"]):
            generate_chart.invoke(
                {"kind": "bar", "x": "day", "y": "revenue", "title": "t", "dataset": dataset}
            )
    for figure in figures:
        ax = figure.axes[0]
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == sorted(days), ticks  # in time order, without "00:00:00"
        assert [bar.get_height() for bar in ax.patches] == [1, 2, 3, 7, 12]
    periods = [{"period": f"2025-{m:02}", "value": m} for m in (2, 1, 3)]
    with use_workspace(tmp_path):
        generate_chart.invoke(
            {"kind": "line", "x": "period", "y": "value", "title": "t", "data": periods}
        )
    ticks = [t.get_text() for t in figures[-1].axes[0].get_xticklabels()]
    assert ticks == ["2025-01", "2025-02", "2025-03"]  # sorted, written as given


def test_the_headline_gives_a_flat_trend_and_its_change_apart():
    from planexec.tools.data.report import headline

    trends = {
        "direction": "flat",
        "change_pct": -2.8912,
        "first": {"period": "2025-01"},
        "last": {"period": "2025-12"},
    }
    said = headline(None, trends, None)
    assert said == "The trend is flat (-2.89% from 2025-01 to 2025-12)."
    rising = {**trends, "direction": "up", "change_pct": 12.5}
    assert headline(None, rising, None) == "The trend is up (+12.50% from 2025-01 to 2025-12)."
