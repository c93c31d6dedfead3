"""Turning a column into dates: ISO (any offsets), day- or month-first, Excel serials.

A timestamp written with a UTC offset (``2025-02-01T00:30:00+01:00``) is read as the local
date and time written in it (``2025-02-01 00:30``), the clock the data was written in, so a
sale in the first hours of a month stays in that month; with ``utc=True`` it is converted to
UTC instead. A column with a time zone (Parquet, Excel) is read in its own zone, or in UTC.
Either way :attr:`Coerced.time` says which, and the offsets the column holds.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from planexec.errors import ToolError
from planexec.tools.data.coercion import Coerced, checked, per_unique
from planexec.tools.data.reading import is_text

SLASHED = re.compile(r"^\s*(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?:[ T].*)?$")
EXCEL_SERIALS = (20_000, 80_000)  # 1954-10-03 .. 2119-01-10: other numbers are not dates
OFFSET = re.compile(
    r"(?:[+-]\d\d:\d\d|(?<=[\d ])[+-]\d{4}|(?<=:\d\d)[+-]\d\d|(?<=\.\d)[+-]\d\d|(?<=\.\d\d)[+-]\d\d"
    r"|(?<=[\d ])Z)$"
)
"""A UTC offset ending a value's last 6 characters: ``+01:00``, or ``+0100`` or ``Z`` after a
digit, or ``-05`` after a time's minutes, seconds or fraction (``2025-01``'s ``-01`` is none)."""
HOUR_ONLY = re.compile(r"\d[+-]\d\d$")
AFTER_TIME = re.compile(r"[T ]\d\d(?::\d\d(?::\d\d(?:[.,]\d+)?)?)?([+-]\d\d)$")
"""An hour-only offset after a time of any precision (``T23+05``, ``00:30:00.123456+01``)."""
TAIL = 6
UTC_HINT = "options.utc=true groups in UTC"


def as_dates(
    series: pd.Series[Any], name: str, date_format: str | None = None, utc: bool = False
) -> Coerced:
    """Return the column as dates without a zone: local time as written, or UTC if ``utc``.

    ISO (with or without offsets, mixed ones included), day/month-first, Excel serials.
    """
    coerced = _as_dates(series, name, date_format, utc)
    if utc and coerced.time is None:
        coerced.time = "UTC (no UTC offsets in the data: times as written)"
    return coerced


def _as_dates(series: pd.Series[Any], name: str, date_format: str | None, utc: bool) -> Coerced:
    hint = 'pass options.date_format ("dayfirst", "monthfirst", "excel" or e.g. "%d.%m.%Y")'
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return _zoned(series, utc)
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return _excel(series, name, date_format, hint)
    if not is_text(series):
        raise ToolError(f"column {name!r} holds {series.dtype} values, not dates")
    if date_format == "excel":
        return _excel(pd.to_numeric(series, errors="coerce"), name, date_format, hint)
    distinct = pd.Series(series.unique()).dropna().astype("string")
    fmt = _text_format(distinct, name, date_format, hint)
    seen: set[int] = set()
    zoned = fmt == "ISO8601" or "%z" in fmt  # only these formats can hold an offset

    def parse(values: pd.Series[Any]) -> pd.Series[Any]:
        text = values.astype("string")
        instants = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
        minutes = (_offset_minutes(text) if zoned else pd.Series(np.nan, text.index)).where(
            instants.notna()
        )
        seen.update(int(m) for m in minutes.dropna().unique())
        clock: pd.Series[Any] = instants.dt.tz_localize(None)
        if utc or minutes.isna().all():
            return clock  # naive values are as written either way
        return clock + pd.to_timedelta(minutes.fillna(0), unit="min")

    try:
        parsed = per_unique(series, parse)
    except ValueError as exc:  # a bad strftime directive given in options.date_format
        raise ToolError(f"column {name!r}: date_format {fmt!r} is not usable: {exc}") from None
    result = checked(name, series, parsed, "dates", hint)
    result.offsets = tuple(offset_text(m) for m in sorted(seen))
    result.time = _said(result.offsets, utc)
    return result


def utc_offsets(series: pd.Series[Any]) -> pd.Series[Any] | None:
    """Return each value's UTC offset as written (``+01:00``), None if the column has none."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        if getattr(series.dt, "tz", None) is None:
            return None
        minutes = series.map(
            lambda v: v.utcoffset().total_seconds() / 60 if v is not pd.NaT else None
        )
    elif is_text(series):
        minutes = per_unique(series, lambda values: _offset_minutes(values.astype("string")))
    else:
        return None
    if minutes.isna().all():
        return None
    texts = {m: offset_text(int(m)) for m in minutes.dropna().unique()}
    return minutes.map(texts).astype("string")


def offset_text(minutes: int) -> str:
    """Write an offset in minutes as ISO does: ``+01:00``, ``-05:30``."""
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02}:{rest:02}"


def _offset_minutes(text: pd.Series[Any]) -> pd.Series[Any]:
    """Return the UTC offset written at the end of each value, in minutes (or NaN).

    Only the distinct last :data:`TAIL` characters are matched: a column of a million
    timestamps has a handful of offsets, so this costs a slice, not a million matches.
    """
    codes, tails = pd.factorize(text.str.slice(-TAIL), use_na_sentinel=True)
    seen, rows = np.unique(codes, return_index=True)
    example = dict(zip(seen.tolist(), text.to_numpy()[rows], strict=True))
    minutes = np.array([_tail_minutes(str(t), str(example.get(i))) for i, t in enumerate(tails)])
    return pd.Series(np.append(minutes, np.nan)[codes], index=text.index, dtype="float64")


def _tail_minutes(tail: str, example: str) -> float:
    """Return the offset a value's tail ends with, in minutes, or NaN.

    A tail that ends in a digit and ``±HH`` (``123+01``: PostgreSQL writes ``.123456+01``)
    is read on a whole value that has it: an offset only after a time (``T23+05``,
    ``00:30:00.123456+01``), never after a date's month (``2025-01``).
    """
    found = OFFSET.search(tail)
    if found is not None:
        return _minutes(found.group())
    if HOUR_ONLY.search(tail):
        whole = AFTER_TIME.search(example)
        if whole is not None:
            return _minutes(whole.group(1))
    return np.nan


def _minutes(offset: str) -> float:
    """Return an offset in minutes, NaN for what cannot be one (``+2025``)."""
    if offset == "Z":
        return 0.0
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 14 or minutes >= 60:
        return np.nan
    value = hours * 60 + minutes
    return float(-value if offset.startswith("-") else value)


def clock(dates: Coerced) -> str:
    """Say briefly which clock a date column was read in (``local time, UTC offsets +01:00``)."""
    if dates.offsets and not (dates.time or "").startswith("UTC"):
        return f"local time, UTC offsets {', '.join(dates.offsets)}"
    return (dates.time or "as written").split(";")[0]


def _said(offsets: tuple[str, ...], utc: bool) -> str | None:
    """Say which clock dates are in: None for dates written without offsets, read as written."""
    listed = ", ".join(offsets)
    if not offsets:
        return None
    if utc:
        return f"UTC (converted from the UTC offsets written: {listed})"
    return f"local time as written (UTC offsets {listed}); {UTC_HINT}"


def _zoned(series: pd.Series[Any], utc: bool) -> Coerced:
    """Read a datetime column: naive as it is; with a zone, in that zone (or in UTC)."""
    zone = getattr(series.dt, "tz", None)
    if zone is None:
        return Coerced(series)
    if utc:
        converted: pd.Series[Any] = series.dt.tz_convert("UTC").dt.tz_localize(None)
        return Coerced(converted, time=f"UTC (converted from {zone})")
    return Coerced(series.dt.tz_localize(None), time=f"local time in {zone}; {UTC_HINT}")


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
