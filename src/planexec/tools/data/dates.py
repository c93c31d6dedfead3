"""Turning a column into UTC dates: ISO (any offsets), day- or month-first, Excel serials."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from planexec.errors import ToolError
from planexec.tools.data.coercion import Coerced, checked, per_unique
from planexec.tools.data.reading import is_text

SLASHED = re.compile(r"^\s*(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?:[ T].*)?$")
EXCEL_SERIALS = (20_000, 80_000)  # 1954-10-03 .. 2119-01-10: other numbers are not dates


def as_dates(series: pd.Series[Any], name: str, date_format: str | None = None) -> Coerced:
    """Return the column as UTC dates (no zone): ISO, day/month-first, Excel serials."""
    hint = 'pass options.date_format ("dayfirst", "monthfirst", "excel" or e.g. "%d.%m.%Y")'
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return Coerced(_naive_utc(series))
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return _excel(series, name, date_format, hint)
    if not is_text(series):
        raise ToolError(f"column {name!r} holds {series.dtype} values, not dates")
    if date_format == "excel":
        return _excel(pd.to_numeric(series, errors="coerce"), name, date_format, hint)
    distinct = pd.Series(series.unique()).dropna().astype("string")
    fmt = _text_format(distinct, name, date_format, hint)

    def parse(values: pd.Series[Any]) -> pd.Series[Any]:
        text = values.astype("string")
        return _naive_utc(pd.to_datetime(text, format=fmt, errors="coerce", utc=True))

    try:
        parsed = per_unique(series, parse)
    except ValueError as exc:  # a bad strftime directive given in options.date_format
        raise ToolError(f"column {name!r}: date_format {fmt!r} is not usable: {exc}") from None
    return checked(name, series, parsed, "dates", hint)


def _text_format(text: pd.Series[Any], name: str, date_format: str | None, hint: str) -> str:
    if date_format and date_format not in {"dayfirst", "monthfirst"}:
        return date_format
    present = text.dropna()
    if not present.head(1000).str.match(SLASHED.pattern).any():
        return "ISO8601"  # a slashed value further down is refused by the lost-share check
    parts = present.str.extract(SLASHED.pattern).dropna()
    first, sep, second = parts[0].astype(int), parts[1].iloc[0], parts[2].astype(int)
    year = "%Y" if parts[3].str.len().max() == 4 else "%y"
    day_seen, month_seen = bool((first > 12).any()), bool((second > 12).any())
    if date_format is None and day_seen and month_seen:
        raise ToolError(f"column {name!r} mixes day-first and month-first dates; {hint}")
    if date_format is None and not day_seen and not month_seen and sep != ".":
        example = text.dropna().iloc[0]
        raise ToolError(
            f"column {name!r}: dates like {example!r} could be day- or month-first; {hint}"
        )
    dayfirst = date_format == "dayfirst" or (date_format is None and (day_seen or sep == "."))
    order = f"%d{sep}%m" if dayfirst else f"%m{sep}%d"
    return f"{order}{sep}{year}"


def _excel(series: pd.Series[Any], name: str, date_format: str | None, hint: str) -> Coerced:
    numbers = pd.to_numeric(series, errors="coerce")
    low, high = EXCEL_SERIALS
    inside = numbers.between(low, high)
    if date_format != "excel" and not bool(inside[numbers.notna()].all()):
        raise ToolError(f"column {name!r} holds numbers that are not Excel serial dates; {hint}")
    dates = pd.to_datetime(numbers.where(inside), unit="D", origin="1899-12-30")
    return checked(name, series, dates, "dates", hint)


def _naive_utc(series: pd.Series[Any]) -> pd.Series[Any]:
    if getattr(series.dt, "tz", None) is not None:
        converted: pd.Series[Any] = series.dt.tz_convert("UTC").dt.tz_localize(None)
        return converted
    return series
