"""The ``detect_trends`` tool, and the trend fit the charts draw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired

import numpy as np
from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.errors import ToolError
from planexec.tools.data.coercion import finite
from planexec.tools.data.columns import Period, PeriodValue, by_period, read_columns
from planexec.tools.data.reading import ReadOptions


class Anomaly(TypedDict):
    """A period far from the trend line: its value, the line's, and how many deviations."""

    period: str
    value: float | None
    expected: float | None
    z: float | None


class TrendWithoutLast(TypedDict):
    """The trend fitted without the last period (when that period is an anomaly)."""

    direction: str
    slope_per_period: float | None
    change_pct: float | None


class Trends(TypedDict):
    """What ``detect_trends`` returns."""

    value_column: str
    periods: int
    direction: str
    slope_per_period: float | None
    slope_pct_of_mean: float | None
    r_squared: float | None
    first: PeriodValue
    last: PeriodValue
    change_pct: float | None
    anomalies: list[Anomaly]
    dates: NotRequired[str]
    without_last: NotRequired[TrendWithoutLast]
    unit: NotRequired[str]


@dataclass(frozen=True)
class Fit:
    """A least-squares line through equally spaced values, and which values stand out."""

    slope: float
    fitted: np.ndarray[Any, np.dtype[np.float64]]
    z: np.ndarray[Any, np.dtype[np.float64]]
    r_squared: float
    relative: float

    @property
    def direction(self) -> str:
        """Say "up", "down" or "flat" (under 1% of the mean per period)."""
        return "flat" if abs(self.relative) < 1 else ("up" if self.slope > 0 else "down")


def fit(y: np.ndarray[Any, np.dtype[np.float64]]) -> Fit:
    """Fit a line through ``y`` (at least 2 values) and score each value's residual."""
    x = np.arange(len(y), dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = slope * x + intercept
    residuals = y - fitted
    spread = residuals.std() or 1.0
    total_ss = float(((y - y.mean()) ** 2).sum()) or 1.0
    r_squared = 1 - float((residuals**2).sum()) / total_ss
    relative = 100 * slope / (abs(y.mean()) or 1.0)
    return Fit(float(slope), fitted, residuals / spread, r_squared, float(relative))


@tool
def detect_trends(
    dataset: str,
    value_column: str,
    date_column: str,
    period: Period = "M",
    z_threshold: float = 2.0,
    options: ReadOptions | None = None,
) -> Trends:
    """Find the trend of a column over time (least-squares slope) and anomalous periods.

    An anomaly is a period whose residual from the trend line is more than z_threshold
    standard deviations away. When the last period is an anomaly, the trend without it is
    given too (``without_last``). Reads only the two columns it uses. Periods are those of
    the local date and time written in the data (options.utc=true: UTC), as "dates" says.
    """
    cols = read_columns(dataset, [value_column, date_column], options)
    values = cols.numbers(value_column)
    series = by_period(values, cols.dates(date_column, options), period, "sum")
    if len(series) < 3:
        raise ToolError(f"only {len(series)} periods; a trend needs at least 3")
    y = series.to_numpy(dtype=float)
    line = fit(y)
    anomalies = [
        Anomaly(period=str(p), value=finite(v), expected=finite(f), z=finite(z))
        for p, v, f, z in zip(series.index, y, line.fitted, line.z, strict=True)
        if abs(z) > z_threshold
    ]
    result: Trends = {
        "value_column": value_column,
        "periods": len(series),
        "direction": line.direction,
        "slope_per_period": finite(line.slope),
        "slope_pct_of_mean": finite(line.relative),
        "r_squared": finite(line.r_squared),
        "first": PeriodValue(period=str(series.index[0]), value=finite(y[0])),
        "last": PeriodValue(period=str(series.index[-1]), value=finite(y[-1])),
        "change_pct": finite(100 * (y[-1] - y[0]) / (abs(y[0]) or 1.0)),
        "anomalies": anomalies,
    }
    if said := cols.time(date_column):
        result["dates"] = said
    if abs(line.z[-1]) > z_threshold and len(y) >= 4:
        before = fit(y[:-1])
        result["without_last"] = TrendWithoutLast(
            direction=before.direction,
            slope_per_period=finite(before.slope),
            change_pct=finite(100 * (y[-2] - y[0]) / (abs(y[0]) or 1.0)),
        )
    unit = cols.unit(value_column)
    if unit:
        result["unit"] = unit
    return result
