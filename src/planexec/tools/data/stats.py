"""The ``calculate_stats`` tool: totals, per-period totals with growth, a breakdown."""

from __future__ import annotations

from typing import Literal, NotRequired

from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.tools.data.coercion import finite
from planexec.tools.data.columns import Period, PeriodValue, by_period, read_columns
from planexec.tools.data.reading import ReadOptions

MAX_GROUPS = 50


class Growth(TypedDict):
    """A period's growth over the one before, in percent."""

    period: str
    pct: float | None


class Share(TypedDict):
    """A group's value and its share of all groups, in percent."""

    group: str
    value: float | None
    share_pct: float | None


class Stats(TypedDict):
    """What ``calculate_stats`` returns (per-period fields only with a date column)."""

    value_column: str
    rows: int
    total: float | None
    mean: float | None
    min: float | None
    max: float | None
    period: NotRequired[str]
    dates: NotRequired[str]
    by_period: NotRequired[list[PeriodValue]]
    growth_pct: NotRequired[list[Growth]]
    breakdown: NotRequired[list[Share]]
    unit: NotRequired[str]
    unreadable_values: NotRequired[dict[str, int]]


@tool
def calculate_stats(
    dataset: str,
    value_column: str,
    date_column: str | None = None,
    period: Period = "M",
    group_by: str | None = None,
    agg: Literal["sum", "mean", "count"] = "sum",
    options: ReadOptions | None = None,
) -> Stats:
    """Summarise a numeric column: totals, per-period totals with growth, breakdown by a column.

    Reads only the columns it uses. Currency and thousands separators are understood; a
    column that is mostly not numbers (or dates) is refused, not summed as nulls. Periods
    are those of the local date and time written in the data (options.utc=true: UTC);
    "dates" says which when the data has UTC offsets or a time zone.
    """
    cols = read_columns(dataset, [value_column, date_column, group_by], options)
    values = cols.numbers(value_column)
    result: Stats = {
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
        if said := cols.time(date_column):
            result["dates"] = said
        result["by_period"] = [
            PeriodValue(period=str(p), value=finite(v)) for p, v in series.items()
        ]
        result["growth_pct"] = [
            Growth(period=str(p), pct=finite(g)) for p, g in growth.items() if g == g
        ]
    if group_by:
        groups = values.groupby(cols.frame[group_by]).agg(agg).sort_values(ascending=False)
        total = float(groups.sum()) or 1.0
        result["breakdown"] = [
            Share(group=str(g), value=finite(v), share_pct=finite(100 * v / total))
            for g, v in groups.head(MAX_GROUPS).items()
        ]
    unit = cols.unit(value_column)
    if unit:
        result["unit"] = unit
    skipped = {n: c.lost for n, c in cols.lost.items() if c.lost}
    if skipped:
        result["unreadable_values"] = skipped
    return result
