"""Reading the columns a tool uses, converted: numbers as numbers, dates as dates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from typing_extensions import TypedDict

from planexec.errors import ToolError
from planexec.tools.data.coercion import Coerced, as_numbers
from planexec.tools.data.dates import as_dates
from planexec.tools.data.reading import ReadOptions, Source, read_dataset

Period = Literal["D", "W", "M", "Q", "Y"]


class PeriodValue(TypedDict):
    """One period's value (null when it is not a finite number)."""

    period: str
    value: float | None


MAX_PERIODS = 500
UNITS = "planexec_units"
"""The Parquet metadata key (``DataFrame.attrs``) of the columns' currencies."""
DATES = "planexec_dates"
"""The Parquet metadata key of the date columns' clocks (local time as written, or UTC)."""


@dataclass
class Columns:
    """A dataset's used columns, read and converted, and what conversion lost."""

    frame: pd.DataFrame
    source: Source
    lost: dict[str, Coerced] = field(default_factory=dict)
    times: dict[str, str] = field(default_factory=dict)

    def numbers(self, name: str) -> pd.Series[Any]:
        """Return a column as numbers (refusing a column that is mostly not numbers)."""
        coerced = as_numbers(self.frame[name], name, self.source.decimal)
        self.note(name, coerced)
        return coerced.values

    def dates(self, name: str, options: ReadOptions | None) -> pd.Series[Any]:
        """Return a column as dates (refusing a column that is mostly not dates).

        Local time as written, or UTC with ``options.utc``; :meth:`time` then says which.
        """
        opts = options or ReadOptions()
        column = self.frame[name]
        saved = self.saved_time(name)
        if (
            saved
            and opts.utc
            and not saved.startswith("UTC")
            and pd.api.types.is_datetime64_any_dtype(column.dtype)
            and getattr(column.dt, "tz", None) is None
        ):
            raise ToolError(
                f"column {name!r} holds the local times written in the data ({saved}): "
                "it was cleaned without options.utc; clean the source again with "
                "options.utc=true for UTC dates"
            )
        coerced = as_dates(column, name, opts.date_format, opts.utc)
        self.note(name, coerced)
        said = coerced.time or saved
        if said:
            self.times[name] = said
        return coerced.values

    def time(self, name: str) -> str | None:
        """Say which clock a date column read by :meth:`dates` is in, when the data says."""
        return self.times.get(name)

    def saved_time(self, name: str) -> str | None:
        """Return what a cleaned file says of a date column's clock (``DATES`` metadata)."""
        saved = self.frame.attrs.get(DATES) or {}
        return str(saved[name]) if isinstance(saved, dict) and name in saved else None

    def note(self, name: str, coerced: Coerced) -> None:
        """Remember what converting a column lost, and its currency."""
        if coerced.lost or coerced.unit:
            self.lost[name] = coerced

    def unit(self, name: str) -> str | None:
        """Return the currency a number column was written in, if one symbol was seen."""
        found = self.lost.get(name)
        if found and found.unit:
            return found.unit
        saved = self.frame.attrs.get(UNITS) or {}
        return str(saved[name]) if isinstance(saved, dict) and name in saved else None


def read_columns(dataset: str, names: Sequence[str | None], options: ReadOptions | None) -> Columns:
    """Read only the named columns of a dataset (None entries are skipped)."""
    wanted = list(dict.fromkeys(n for n in names if n))
    frame, source = read_dataset(dataset, wanted, options)
    return Columns(frame, source)


def by_period(
    values: pd.Series[Any], dates: pd.Series[Any], period: Period, agg: str
) -> pd.Series[Any]:
    """Aggregate values per calendar period, in time order (bounded number of periods)."""
    grouped = values.groupby(dates.dt.to_period(period)).agg(agg)
    if len(grouped) > MAX_PERIODS:
        raise ToolError(f"{len(grouped)} periods; at most {MAX_PERIODS} (use a longer period)")
    return grouped.sort_index()
