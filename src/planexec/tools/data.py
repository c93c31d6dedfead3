"""Data-analysis toolkit: load, clean, summarise, find trends, chart and report.

Datasets move between steps as files in the workspace (CSV in, Parquet after cleaning);
tools return small JSON summaries whose ``dataset`` or ``path`` fields name those files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from langchain_core.tools import tool

from planexec.errors import ToolError
from planexec.tools.workspace import current_workspace

Period = Literal["D", "W", "M", "Q", "Y"]
PANDAS_PERIOD = {"D": "D", "W": "W", "M": "M", "Q": "Q", "Y": "Y"}
MAX_PERIODS = 500


def read_dataset(dataset: str) -> pd.DataFrame:
    """Read a CSV or Parquet file of the workspace into a DataFrame."""
    path = current_workspace().resolve(dataset, must_exist=True)
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise ToolError(f"cannot read {dataset!r} as a dataset: {exc}") from None


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame.columns:
        raise ToolError(f"no column {name!r} (columns: {', '.join(map(str, frame.columns))})")
    return frame[name]


def _number(value: Any) -> float | None:
    number = float(value)
    return round(number, 4) if np.isfinite(number) else None


def _profile(frame: pd.DataFrame) -> dict[str, Any]:
    return {
        "rows": len(frame),
        "columns": {str(c): str(t) for c, t in frame.dtypes.items()},
        "null_counts": {str(c): int(n) for c, n in frame.isna().sum().items() if n},
        "duplicate_rows": int(frame.duplicated().sum()),
        "sample": frame.head(3).astype(str).to_dict(orient="records"),
    }


@tool
def load_csv(path: str) -> dict[str, Any]:
    """Load a CSV file of the workspace; return rows, column types, nulls and duplicates."""
    frame = read_dataset(path)
    return {
        "dataset": current_workspace().relative(current_workspace().resolve(path)),
        **_profile(frame),
    }


def _by_period(frame: pd.DataFrame, value: str, date: str, period: Period, agg: str) -> pd.Series:
    dates = pd.to_datetime(_column(frame, date), errors="coerce")
    values = pd.to_numeric(_column(frame, value), errors="coerce")
    grouped = values.groupby(dates.dt.to_period(PANDAS_PERIOD[period])).agg(agg)
    if len(grouped) > MAX_PERIODS:
        raise ToolError(f"{len(grouped)} periods; at most {MAX_PERIODS} (use a longer period)")
    return grouped.sort_index()


@tool
def clean_data(
    dataset: str,
    output_path: str | None = None,
    required_columns: list[str] | None = None,
    dedupe_on: list[str] | None = None,
    date_columns: list[str] | None = None,
    numeric_columns: list[str] | None = None,
) -> dict[str, Any]:
    """Clean a dataset and save it as Parquet.

    In order: trims text, converts date_columns to dates and numeric_columns to numbers
    (unparseable values become null; by default columns named like "date" become dates and
    text columns that are at least 95% numbers become numbers), drops duplicate rows (rows
    equal in dedupe_on, or in every column), then drops rows with a null in required_columns
    (default: any column). Returns the new dataset's path and what was removed.
    """
    frame = read_dataset(dataset)
    before = len(frame)
    text_cols = [c for c in frame.columns if frame[c].dtype == object]
    for col in text_cols:
        frame[col] = frame[col].map(lambda v: v.strip() if isinstance(v, str) else v)
        frame[col] = frame[col].replace("", np.nan)
    converted: dict[str, str] = {}
    dates = (
        date_columns
        if date_columns is not None
        else [c for c in frame.columns if "date" in str(c).lower()]
    )
    for col in dates:
        frame[col] = pd.to_datetime(_column(frame, col), errors="coerce")
        converted[str(col)] = "datetime"
    numbers = (
        numeric_columns
        if numeric_columns is not None
        else [
            c
            for c in text_cols
            if c not in dates
            and pd.to_numeric(frame[c], errors="coerce").notna().sum()
            >= 0.95 * frame[c].notna().sum()
            and frame[c].notna().any()
        ]
    )
    for col in numbers:
        frame[col] = pd.to_numeric(_column(frame, col), errors="coerce")
        converted[str(col)] = "number"
    for col in dedupe_on or []:
        _column(frame, col)
    deduped = frame.drop_duplicates(subset=dedupe_on or None)
    removed_duplicates = len(frame) - len(deduped)
    for col in required_columns or []:
        _column(frame, col)
    cleaned = deduped.dropna(subset=required_columns or None).reset_index(drop=True)
    workspace = current_workspace()
    target = output_path or f"{Path(dataset).with_suffix('').as_posix()}.clean.parquet"
    out = workspace.prepare_output(target)
    cleaned.to_parquet(out, index=False)
    return {
        "dataset": workspace.relative(out),
        "rows_before": before,
        "rows_after": len(cleaned),
        "removed_duplicates": removed_duplicates,
        "removed_null_rows": len(deduped) - len(cleaned),
        "converted": converted,
        "columns": {str(c): str(t) for c, t in cleaned.dtypes.items()},
    }


@tool
def calculate_stats(
    dataset: str,
    value_column: str,
    date_column: str | None = None,
    period: Period = "M",
    group_by: str | None = None,
    agg: Literal["sum", "mean", "count"] = "sum",
) -> dict[str, Any]:
    """Summarise a numeric column: totals, per-period totals with growth, breakdown by a column."""
    frame = read_dataset(dataset)
    values = pd.to_numeric(_column(frame, value_column), errors="coerce")
    result: dict[str, Any] = {
        "value_column": value_column,
        "rows": int(values.notna().sum()),
        "total": _number(values.sum()),
        "mean": _number(values.mean()),
        "min": _number(values.min()),
        "max": _number(values.max()),
    }
    if date_column:
        series = _by_period(frame, value_column, date_column, period, agg)
        growth = series.pct_change() * 100
        result["period"] = period
        result["by_period"] = [{"period": str(p), "value": _number(v)} for p, v in series.items()]
        result["growth_pct"] = [
            {"period": str(p), "pct": _number(g)} for p, g in growth.items() if pd.notna(g)
        ]
    if group_by:
        groups = values.groupby(_column(frame, group_by)).agg(agg).sort_values(ascending=False)
        total = float(groups.sum()) or 1.0
        result["breakdown"] = [
            {"group": str(g), "value": _number(v), "share_pct": _number(100 * v / total)}
            for g, v in groups.head(50).items()
        ]
    return result


@tool
def detect_trends(
    dataset: str,
    value_column: str,
    date_column: str,
    period: Period = "M",
    z_threshold: float = 2.0,
) -> dict[str, Any]:
    """Find the trend of a column over time (least-squares slope) and anomalous periods.

    An anomaly is a period whose residual from the trend line is more than z_threshold
    standard deviations away.
    """
    series = _by_period(read_dataset(dataset), value_column, date_column, period, "sum")
    if len(series) < 3:
        raise ToolError(f"only {len(series)} periods; a trend needs at least 3")
    x = np.arange(len(series), dtype=float)
    y = series.to_numpy(dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = slope * x + intercept
    residuals = y - fitted
    spread = residuals.std() or 1.0
    total_ss = float(((y - y.mean()) ** 2).sum()) or 1.0
    r_squared = 1 - float((residuals**2).sum()) / total_ss
    relative = 100 * slope / (abs(y.mean()) or 1.0)
    direction = "flat" if abs(relative) < 1 else ("up" if slope > 0 else "down")
    anomalies = [
        {"period": str(p), "value": _number(v), "expected": _number(f), "z": _number(r / spread)}
        for p, v, f, r in zip(series.index, y, fitted, residuals, strict=True)
        if abs(r / spread) > z_threshold
    ]
    return {
        "value_column": value_column,
        "periods": len(series),
        "direction": direction,
        "slope_per_period": _number(slope),
        "slope_pct_of_mean": _number(relative),
        "r_squared": _number(r_squared),
        "first": {"period": str(series.index[0]), "value": _number(y[0])},
        "last": {"period": str(series.index[-1]), "value": _number(y[-1])},
        "change_pct": _number(100 * (y[-1] - y[0]) / (abs(y[0]) or 1.0)),
        "anomalies": anomalies,
    }


@tool
def generate_chart(
    kind: Literal["line", "bar", "pie", "scatter"],
    x: str,
    y: str,
    title: str,
    output_path: str = "chart.png",
    data: list[dict[str, Any]] | None = None,
    dataset: str | None = None,
) -> dict[str, Any]:
    """Draw a PNG chart of column y against x, from rows given as data or from a dataset file."""
    # The object API, not pyplot: no global backend switch in a host notebook, no figure registry.
    from matplotlib.figure import Figure

    if (data is None) == (dataset is None):
        raise ToolError("give exactly one of data (a list of rows) or dataset (a file)")
    frame = pd.DataFrame(data) if data is not None else read_dataset(dataset or "")
    xs, ys = _column(frame, x), pd.to_numeric(_column(frame, y), errors="coerce")
    fig = Figure(figsize=(8, 4.5), dpi=100)
    ax = fig.subplots()
    if kind == "line":
        ax.plot(xs.astype(str), ys, marker="o")
    elif kind == "bar":
        ax.bar(xs.astype(str), ys)
    elif kind == "scatter":
        ax.scatter(xs, ys)
    else:
        ax.pie(ys.fillna(0), labels=xs.astype(str).tolist(), autopct="%1.0f%%")
    ax.set_title(title)
    if kind != "pie":
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    workspace = current_workspace()
    out = workspace.prepare_output(output_path)
    if out.suffix.lower() != ".png":
        raise ToolError("output_path must end in .png")
    fig.savefig(out, format="png")
    return {"path": workspace.relative(out), "kind": kind, "points": int(ys.notna().sum())}


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_none_\n"
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(r.get(h)) for h in headers) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@tool
def write_report(
    title: str,
    output_path: str = "report.md",
    summary: str | None = None,
    stats: dict[str, Any] | None = None,
    trends: dict[str, Any] | None = None,
    chart_path: str | None = None,
    sections: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Write a Markdown report with the numbers of calculate_stats and detect_trends and a chart.

    sections are extra {"heading": ..., "body": ...} parts, added at the end.
    """
    parts = [f"# {title}\n"]
    if summary:
        parts.append(summary.strip() + "\n")
    if stats:
        parts.append(f"## Key figures ({stats.get('value_column', 'value')})\n")
        figures = [
            {"measure": k, "value": stats[k]}
            for k in ("rows", "total", "mean", "min", "max")
            if k in stats
        ]
        parts.append(_table(figures))
        if stats.get("by_period"):
            parts.append("### By period\n")
            growth = {g["period"]: g["pct"] for g in stats.get("growth_pct", [])}
            parts.append(
                _table(
                    [
                        {
                            "period": p["period"],
                            "value": p["value"],
                            "growth_pct": growth.get(p["period"], ""),
                        }
                        for p in stats["by_period"]
                    ]
                )
            )
        if stats.get("breakdown"):
            parts.append("### Breakdown\n")
            parts.append(_table(stats["breakdown"]))
    if trends:
        parts.append("## Trend\n")
        first, last = trends.get("first", {}), trends.get("last", {})
        parts.append(
            f"Direction: **{trends.get('direction')}**, {_fmt(trends.get('slope_per_period'))} "
            f"per period (R² {_fmt(trends.get('r_squared'))}); from {_fmt(first.get('value'))} "
            f"in {first.get('period')} to {_fmt(last.get('value'))} in {last.get('period')} "
            f"({_fmt(trends.get('change_pct'))}%).\n"
        )
        parts.append("### Anomalies\n")
        parts.append(_table(trends.get("anomalies", [])))
    workspace = current_workspace()
    out = workspace.prepare_output(output_path)
    if chart_path:
        chart = workspace.resolve(chart_path, must_exist=True)
        link = Path(chart).relative_to(out.parent) if chart.is_relative_to(out.parent) else chart
        parts.append(f"## Chart\n\n![{title}]({Path(link).as_posix()})\n")
    for section in sections or []:
        parts.append(f"## {section.get('heading', '')}\n\n{section.get('body', '')}\n")
    text = "\n".join(parts)
    out.write_text(text, encoding="utf-8")
    return {
        "path": workspace.relative(out),
        "bytes": len(text.encode()),
        "sections": len(parts) - 1,
    }


DATA_TOOLS = [load_csv, calculate_stats, detect_trends]
SIDE_EFFECT_DATA_TOOLS = [clean_data, generate_chart, write_report]
FILE_FIELDS: dict[str, tuple[str, ...]] = {
    "load_csv": ("dataset",),
    "clean_data": ("dataset",),
    "generate_chart": ("path",),
    "write_report": ("path",),
}
"""Output fields of these tools that name workspace files."""
