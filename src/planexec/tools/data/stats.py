"""The ``calculate_stats`` tool: totals, per-period totals with growth, a breakdown."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import tool

from planexec.tools.data.coercion import finite
from planexec.tools.data.columns import Period, by_period, read_columns
from planexec.tools.data.reading import ReadOptions

MAX_GROUPS = 50


@tool
def calculate_stats(
    dataset: str,
    value_column: str,
    date_column: str | None = None,
    period: Period = "M",
    group_by: str | None = None,
    agg: Literal["sum", "mean", "count"] = "sum",
    options: ReadOptions | None = None,
) -> dict[str, Any]:
    """Summarise a numeric column: totals, per-period totals with growth, breakdown by a column.

    Reads only the columns it uses. Currency and thousands separators are understood; a
    column that is mostly not numbers (or dates) is refused, not summed as nulls. Periods
    are those of the local date and time written in the data (options.utc=true: UTC);
    "dates" says which when the data has UTC offsets or a time zone.
    """
    cols = read_columns(dataset, [value_column, date_column, group_by], options)
    values = cols.numbers(value_column)
    result: dict[str, Any] = {
        "value_column": value_column,
        "rows": int(values.notna().sum()),
        "total": finite(values.sum()),
        "mean": finite(values.mean()),
        "min": finite(values.min()),
        "max": finite(values.max()),
    }
    if date_column:
        series = by_period(values, cols.dates(date_column, options), period, agg)
        growth = series.pct_change(fill_method=None) * 100
        result["period"] = period
        if cols.time(date_column):
            result["dates"] = cols.time(date_column)
        result["by_period"] = [{"period": str(p), "value": finite(v)} for p, v in series.items()]
        result["growth_pct"] = [
            {"period": str(p), "pct": finite(g)} for p, g in growth.items() if g == g
        ]
    if group_by:
        groups = values.groupby(cols.frame[group_by]).agg(agg).sort_values(ascending=False)
        total = float(groups.sum()) or 1.0
        result["breakdown"] = [
            {"group": str(g), "value": finite(v), "share_pct": finite(100 * v / total)}
            for g, v in groups.head(MAX_GROUPS).items()
        ]
    unit = cols.unit(value_column)
    if unit:
        result["unit"] = unit
    skipped = {n: c.lost for n, c in cols.lost.items() if c.lost}
    if skipped:
        result["unreadable_values"] = skipped
    return result
