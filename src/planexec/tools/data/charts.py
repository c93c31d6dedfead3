"""The ``generate_chart`` tool: a labelled PNG chart, aggregated before it is drawn."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal, NotRequired

import numpy as np
import pandas as pd
from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.errors import ToolError
from planexec.tools.data.columns import Columns, by_period, read_columns
from planexec.tools.data.dates import as_dates
from planexec.tools.data.reading import ReadOptions, Source, is_text
from planexec.tools.data.trends import fit
from planexec.tools.workspace import current_workspace

MAX_POINTS = 200
MAX_SCATTER = 5000
MAX_SLICES = 8


class Chart(TypedDict):
    """What ``generate_chart`` returns: the PNG's path and how it was drawn."""

    path: str
    kind: str
    points: int
    x_label: str
    y_label: str
    aggregated: NotRequired[str]
    dates: NotRequired[str]


def _points(
    cols: Columns, kind: str, x: str, y: str, options: ReadOptions | None
) -> tuple[pd.Series[Any], str]:
    """Return the y values indexed by x, aggregated (sum) when there are too many to draw."""
    ys = cols.numbers(y)
    frame = cols.frame
    if kind == "scatter":
        both = pd.DataFrame({"x": pd.to_numeric(frame[x], errors="coerce"), "y": ys}).dropna()
        sampled = both.sample(MAX_SCATTER, random_state=0) if len(both) > MAX_SCATTER else both
        return sampled.set_index("x")["y"], f"{len(sampled):,} of {len(both):,} points" if len(
            both
        ) > MAX_SCATTER else ""
    dates = _dates(cols, x, options)
    if dates is not None:
        if len(frame) <= MAX_POINTS and dates.is_unique:  # each row a point, in time order
            order = dates.dropna().sort_values(kind="stable").index
            when = dates[order]
            shown = "%Y-%m-%d" if (when.dt.normalize() == when).all() else "%Y-%m-%d %H:%M"
            labels = frame[x][order] if is_text(frame[x]) else when.dt.strftime(shown)
            return pd.Series(ys[order].to_numpy(), index=labels.astype(str)), ""
        series = by_period(ys, dates, "M", "sum")
        return series.set_axis(series.index.astype(str)), "sum per month"
    if len(frame) <= MAX_POINTS and frame[x].is_unique:
        return pd.Series(ys.to_numpy(), index=frame[x].astype(str)), ""
    grouped = ys.groupby(frame[x].astype(str)).sum().sort_values(ascending=False)
    limit = MAX_SLICES if kind == "pie" else 30
    return grouped.head(limit), f"sum per {x}, top {limit}" if len(
        grouped
    ) > limit else f"sum per {x}"


def _dates(cols: Columns, x: str, options: ReadOptions | None) -> pd.Series[Any] | None:
    """Return x as dates when it holds dates (named like "date": it must), else None."""
    series = cols.frame[x]
    if "date" in x.lower() or pd.api.types.is_datetime64_any_dtype(series.dtype):
        return cols.dates(x, options)
    if not is_text(series):
        return None
    try:  # a sample first: a column of names or ids costs no full parse
        if as_dates(series.dropna().head(1000), x).lost:
            return None
        dates = cols.dates(x, options)
    except ToolError:
        return None  # text that is not dates: categories
    if cols.lost.get(x) and cols.lost[x].lost:
        del cols.lost[x]  # categories, not dates with a few unreadable values
        cols.times.pop(x, None)
        return None
    return dates


def _money(ax: Any, unit: str | None) -> Any:
    """Return a y-axis formatter: thousands separators, the currency sign, decimals if small."""
    from matplotlib.ticker import FuncFormatter

    prefix = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}.get(unit or "", "")
    small = max(abs(v) for v in ax.get_ylim()) < 100
    return FuncFormatter(lambda v, _pos: f"{prefix}{v:,.2f}" if small else f"{prefix}{v:,.0f}")


@tool
def generate_chart(
    kind: Literal["line", "bar", "pie", "scatter"],
    x: str,
    y: str,
    title: str,
    output_path: str = "chart.png",
    data: list[dict[str, Any]] | None = None,
    dataset: str | None = None,
    unit: str | None = None,
    options: ReadOptions | None = None,
) -> Chart:
    """Draw a PNG chart of column y against x, from rows given as data or from a dataset file.

    Many rows are summed per x (per month for dates: the local months written in the data,
    or UTC months with options.utc=true) before drawing. Axes are labelled from
    the columns with thousands separators (and the unit, e.g. "USD"); bars start at zero; a
    line chart of 3+ points shows its least-squares trend (without the last point when that
    is an anomaly, as detect_trends' without_last) and rings anomalies (|z| > 2).
    """
    from matplotlib.figure import Figure  # the object API: no pyplot registry, no backend switch

    if (data is None) == (dataset is None):
        raise ToolError("give exactly one of data (a list of rows) or dataset (a file)")
    if data is not None:
        frame = pd.DataFrame(data)
        for name in (x, y):
            if name not in frame.columns:
                raise ToolError(
                    f"no column {name!r} in data (columns: {', '.join(map(str, frame.columns))})"
                )
        cols = Columns(frame[[x, y]] if x != y else frame[[x]], Source("rows"))
    else:
        cols = read_columns(dataset or "", [x, y], options)
    points, note = _points(cols, kind, x, y, options)
    unit = unit or cols.unit(y)
    fig = Figure(figsize=(9, 5), dpi=110)
    ax = fig.subplots()
    labels, values = [str(i) for i in points.index], points.to_numpy(dtype=float)
    if kind == "pie":
        ax.pie(np.nan_to_num(values), labels=labels, autopct="%1.0f%%")
    elif kind == "scatter":
        ax.scatter(points.index, values, s=8, alpha=0.6)
    else:
        positions = np.arange(len(values))
        if kind == "bar":
            ax.bar(positions, values)
            ax.set_ylim(bottom=min(0.0, float(np.nanmin(values))) if len(values) else 0)
        else:
            ax.plot(positions, values, marker="o", label=y)
            _trend(ax, values, labels)
        step = max(1, len(labels) // 24)
        ax.set_xticks(positions[::step], labels[::step], rotation=45, ha="right")
    ax.set_title(title + (f" ({note})" if note else ""))
    said = cols.time(x) if x in cols.frame.columns else None
    clock = _clock_label(said)
    x_label = f"{x} (month{f', {clock}' if clock else ''})" if note == "sum per month" else x
    y_label = f"{y} ({unit})" if unit else y
    if kind != "pie":
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.yaxis.set_major_formatter(_money(ax, unit))
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    workspace = current_workspace()
    if PurePosixPath(workspace.name(output_path)).suffix.lower() != ".png":
        raise ToolError("output_path must end in .png")
    with workspace.open_write(output_path) as out:
        fig.savefig(out, format="png")
    found = Chart(
        path=workspace.name(output_path),
        kind=kind,
        points=int(np.isfinite(values).sum()),
        x_label=x_label,
        y_label=y_label,
    )
    if note:
        found["aggregated"] = note
    if said:
        found["dates"] = said
    return found


def _trend(ax: Any, values: np.ndarray[Any, np.dtype[np.float64]], labels: list[str]) -> None:
    """Draw the least-squares trend and ring the anomalies (|z| > 2, as detect_trends).

    When the last point is an anomaly, the line is fitted without it (as detect_trends'
    ``without_last``, which the report states): a collapse or spike in the last period
    would otherwise tilt the whole line.
    """
    finite = np.isfinite(values)
    if finite.sum() < 3 or not finite.all():
        return
    line = fit(values)
    positions = np.arange(len(values))
    odd = np.abs(line.z) > 2
    if odd[-1] and len(values) >= 4:
        before = fit(values[:-1])
        label = f"trend without {labels[-1]} ({before.direction})"
        ax.plot(positions[:-1], before.fitted, linestyle="--", color="gray", label=label)
    else:
        label = f"trend ({line.direction})"
        ax.plot(positions, line.fitted, linestyle="--", color="gray", label=label)
    if odd.any():
        ax.scatter(
            positions[odd],
            values[odd],
            s=120,
            facecolors="none",
            edgecolors="red",
            linewidths=2,
            label="anomaly",
            zorder=3,
        )
    ax.legend()


def _clock_label(said: str | None) -> str | None:
    """Name a date column's clock on an axis: UTC, local time, or nothing (no offsets)."""
    if not said or "no UTC offsets" in said:
        return None  # times as written: there was no clock to choose
    return "UTC" if said.startswith("UTC") else "local time"
