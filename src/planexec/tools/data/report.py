"""The ``write_report`` tool: a Markdown report of the figures, the trend, cleaning and a chart."""

from __future__ import annotations

import posixpath
from typing import Any

from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.errors import WorkspaceError
from planexec.tools.workspace import current_workspace, missing_message


class Report(TypedDict):
    """What ``write_report`` returns: the report's path, its size and its sections."""

    path: str
    bytes: int
    sections: int


def fmt(value: Any) -> str:
    """Format a number with thousands separators (2 decimals for fractions); text as is."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def signed(value: Any) -> str:
    """Format a change with its sign (+2.50, -2.89), like :func:`fmt` otherwise."""
    text = fmt(value)
    return f"+{text}" if isinstance(value, int | float) and value > 0 else text


def table(rows: list[dict[str, Any]]) -> str:
    """Render rows as a Markdown table (their keys as headers)."""
    if not rows:
        return "_none_\n"
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(r.get(h)) for h in headers) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def headline(
    stats: dict[str, Any] | None,
    trends: dict[str, Any] | None,
    cleaning: dict[str, Any] | None,
) -> str:
    """Say the report's figures in one paragraph, formatted as its tables are.

    The trend is never stated without its caveat: when the last period is an anomaly, the
    sentence that gives the change also gives it without that period.
    """
    said: list[str] = []
    if stats and "total" in stats:
        unit = f" {stats['unit']}" if stats.get("unit") else ""
        rows = f" over {fmt(stats['rows'])} rows" if "rows" in stats else ""
        column = stats.get("value_column", "value")
        said.append(f"{column} totals {fmt(stats['total'])}{unit}{rows}.")
    if trends and trends.get("direction"):
        first, last = trends.get("first", {}), trends.get("last", {})
        trend = (
            f"The trend is {trends['direction']} ({signed(trends.get('change_pct'))}% "
            f"from {first.get('period')} to {last.get('period')})"
        )
        without = trends.get("without_last")
        if without:
            trend += (
                f", but {last.get('period')} is an anomaly: without it, "
                f"{without.get('direction')} ({signed(without.get('change_pct'))}%)"
            )
        said.append(trend + ".")
    if cleaning and isinstance(cleaning.get("rows_before"), int):
        removed = cleaning["rows_before"] - cleaning.get("rows_after", cleaning["rows_before"])
        said.append(
            f"{fmt(removed)} of {fmt(cleaning['rows_before'])} rows were removed in cleaning "
            "(see Data cleaning)."
        )
    return " ".join(said)


def stats_part(stats: dict[str, Any]) -> list[str]:
    """Render the key figures, the per-period table with growth, and the breakdown."""
    unit = f", {stats['unit']}" if stats.get("unit") else ""
    parts = [f"## Key figures ({stats.get('value_column', 'value')}{unit})\n"]
    keys = ("rows", "total", "mean", "min", "max")
    parts.append(table([{"measure": k, "value": stats[k]} for k in keys if k in stats]))
    if stats.get("by_period"):
        growth = {g["period"]: g["pct"] for g in stats.get("growth_pct", [])}
        rows = [
            {"period": p["period"], "value": p["value"], "growth_pct": growth.get(p["period"], "")}
            for p in stats["by_period"]
        ]
        parts += ["### By period\n"] + _dates(stats) + [table(rows)]
    if stats.get("breakdown"):
        parts += ["### Breakdown\n", table(stats["breakdown"])]
    return parts


def trends_part(trends: dict[str, Any]) -> list[str]:
    """Render the trend sentence (read without an anomalous last period) and the anomalies."""
    first, last = trends.get("first", {}), trends.get("last", {})
    text = (
        f"Direction: **{trends.get('direction')}**, {fmt(trends.get('slope_per_period'))} "
        f"per period (R² {fmt(trends.get('r_squared'))}); from {fmt(first.get('value'))} "
        f"in {first.get('period')} to {fmt(last.get('value'))} in {last.get('period')} "
        f"({fmt(trends.get('change_pct'))}%).\n"
    )
    without = trends.get("without_last")
    if without:
        text += (
            f"\nThe last period ({last.get('period')}) is an anomaly; without it the trend is "
            f"**{without.get('direction')}**, {fmt(without.get('slope_per_period'))} per period "
            f"({fmt(without.get('change_pct'))}% from first to the period before last).\n"
        )
    return [
        "## Trend\n",
        *_dates(trends),
        text,
        "### Anomalies\n",
        table(trends.get("anomalies", [])),
    ]


def _dates(found: dict[str, Any]) -> list[str]:
    """Say which clock the periods are in, as the tool that made them said it."""
    said = found.get("dates")
    return [f"Periods: {fmt(said).split(';')[0]}.\n"] if isinstance(said, str) and said else []


def cleaning_part(cleaning: dict[str, Any]) -> list[str]:
    """Render what cleaning removed and why, and the values it could not read."""
    rows = [{"rows removed": r["rows"], "why": r["why"]} for r in cleaning.get("removed", [])]
    parts = [
        "## Data cleaning\n",
        f"{fmt(cleaning.get('rows_before'))} rows read, {fmt(cleaning.get('rows_after'))} kept.\n",
        table(rows),
    ]
    unreadable = cleaning.get("unreadable_values") or {}
    if unreadable:
        shown = [
            {
                "column": c,
                "values set to null": v.get("nulled"),
                "examples": ", ".join(v.get("examples", [])),
            }
            for c, v in unreadable.items()
        ]
        parts += ["Values that could not be read:\n", table(shown)]
    return parts


@tool
def write_report(
    title: str,
    output_path: str = "report.md",
    summary: str | None = None,
    stats: dict[str, Any] | None = None,
    trends: dict[str, Any] | None = None,
    chart_path: str | None = None,
    sections: list[dict[str, str]] | None = None,
    cleaning: dict[str, Any] | None = None,
) -> Report:
    """Write a Markdown report with the numbers of calculate_stats and detect_trends and a chart.

    The report opens with its figures in one paragraph (formatted, the trend with its anomaly
    caveat): summary is added after it, in the planner's words. cleaning is clean_data's
    output (the report says what was removed and why). sections
    are extra {"heading": ..., "body": ...} parts, added at the end.
    """
    parts = [f"# {title}\n"]
    figures = headline(stats, trends, cleaning)
    if figures:
        parts.append(figures[0].upper() + figures[1:] + "\n")
    if summary:
        parts.append(summary.strip() + "\n")
    if stats:
        parts += stats_part(stats)
    if trends:
        parts += trends_part(trends)
    if cleaning:
        parts += cleaning_part(cleaning)
    workspace = current_workspace()
    out = workspace.name(output_path)
    if chart_path:
        if workspace.info(chart_path) is None:
            raise WorkspaceError(missing_message(chart_path, workspace.root))
        link = posixpath.relpath(workspace.name(chart_path), posixpath.dirname(out) or ".")
        parts.append(f"## Chart\n\n![{title}]({link})\n")
    for section in sections or []:
        parts.append(f"## {section.get('heading', '')}\n\n{section.get('body', '')}\n")
    text = "\n".join(parts)
    workspace.write_bytes(output_path, text.encode("utf-8"))
    return {
        "path": out,
        "bytes": len(text.encode()),
        "sections": len(parts) - 1,
    }
