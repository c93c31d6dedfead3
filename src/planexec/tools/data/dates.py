"""Turning a column into dates: ISO (any offsets), day- or month-first, Excel serials.

Text is read value by value: ISO first (year first, never ambiguous, whatever the option),
then the day- or month-first values (times and offsets kept), in the order
``options.date_format`` names or their own values settle (``01/28/2025`` is month-first). So
a column mixing ``2025-01-03`` and ``01/28/2025`` is read, and an error lists only values
that no rule reads.

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
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from planexec.errors import ToolError
from planexec.tools.data.coercion import Coerced, checked, per_unique
from planexec.tools.data.reading import is_text

SLASHED = (
    r"^\s*(?P<first>\d{1,2})(?P<sep>[/.-])(?P<second>\d{1,2})(?P<sep2>[/.-])(?P<year>\d{2,4})"
    r"(?P<time>[ T].*)?$"
)
"""A day- or month-first date (``28/01/2025``, ``1.2.25``, ``01-28-2025 14:30``) in RE2
syntax (no backreference: ``sep2`` must equal ``sep``)."""
ORDERS = ("dayfirst", "monthfirst")
HINT = 'pass options.date_format ("dayfirst", "monthfirst", "excel" or e.g. "%d.%m.%Y")'
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
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return _zoned(series, utc)
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return _excel(series, name, date_format)
    if not is_text(series):
        raise ToolError(f"column {name!r} holds {series.dtype} values, not dates")
    if date_format == "excel":
        return _excel(pd.to_numeric(series, errors="coerce"), name, date_format)
    seen: set[int] = set()

    def parse(values: pd.Series[Any]) -> pd.Series[Any]:
        text = values.astype("string")
        instants, zoned = _instants(text, name, date_format)
        minutes = _offset_minutes(text).where(zoned & instants.notna())
        seen.update(int(m) for m in minutes.dropna().unique())
        clock: pd.Series[Any] = instants.dt.tz_localize(None)
        if utc or minutes.isna().all():
            return clock  # naive values are as written either way
        return clock + pd.to_timedelta(minutes.fillna(0), unit="min")

    result = checked(name, series, per_unique(series, parse), "dates", HINT)
    result.offsets = tuple(offset_text(m) for m in sorted(seen))
    result.time = _said(result.offsets, utc)
    return result


def _instants(
    text: pd.Series[Any], name: str, date_format: str | None
) -> tuple[pd.Series[Any], pd.Series[Any]]:
    """Read each text value as an instant (UTC), by the rule that fits it; NaT if none does.

    ISO values (year first, any offsets) are read as ISO whatever the option says: no other
    order starts with the year. Day- or month-first values (``28/01/2025``, ``01.28.25
    14:30``) are read in the order ``date_format`` names, or the one their own values
    settle (:func:`_day_first`). A strftime ``date_format`` reads the values it fits, ISO the
    rest. Also returns which values may carry a UTC offset (those read as ISO, or by a
    strftime format with ``%z``).
    """
    if date_format and date_format not in ORDERS:
        try:
            instants = pd.to_datetime(text, format=date_format, errors="coerce", utc=True)
        except ValueError as exc:  # a bad strftime directive given in options.date_format
            raise ToolError(
                f"column {name!r}: date_format {date_format!r} is not usable: {exc}"
            ) from None
        zoned = instants.isna() if "%z" not in date_format else pd.Series(True, text.index)
        return instants.fillna(_iso(text.where(instants.isna()))), zoned
    instants = _iso(text)
    rest = text[instants.isna()]  # no day/month value reads as ISO: only these are tried
    if not rest.empty:
        instants = instants.fillna(_iso(_slashed_as_iso(rest, name, date_format)))
    return instants, pd.Series(True, text.index)


def _iso(text: pd.Series[Any]) -> pd.Series[Any]:
    return pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)


def _slashed_as_iso(text: pd.Series[Any], name: str, date_format: str | None) -> pd.Series[Any]:
    """Rewrite the day- or month-first values year first (ISO), times kept; NA for the rest.

    In Arrow (RE2, no Python per value): a million timestamps are rewritten in under a second.
    """
    found = pc.extract_regex(pa.array(text.astype("string")).cast(pa.string()), SLASHED)
    keep = pc.and_(pc.is_valid(found), pc.equal(found.field("sep"), found.field("sep2")))
    rows = text.index[keep.to_numpy(zero_copy_only=False)]
    if rows.empty:
        return pd.Series(pd.NA, index=text.index, dtype="string")
    found = found.filter(keep)
    part = {key: found.field(key) for key in ("first", "sep", "second", "year", "time")}
    day_first = _day_first(part, name, date_format)
    day, month = (part["first"], part["second"]) if day_first else (part["second"], part["first"])
    two = pc.equal(pc.utf8_length(part["year"]), 2)
    short = pc.cast(pc.if_else(two, part["year"], "0"), pa.int32())
    century = pc.if_else(pc.greater_equal(short, 69), "19", "20")  # as strptime's %y
    year = pc.if_else(
        two,
        pc.binary_join_element_wise(century, part["year"], ""),
        pc.utf8_lpad(part["year"], 4, "0"),
    )
    iso = pc.binary_join_element_wise(
        year, "-", pc.utf8_lpad(month, 2, "0"), "-", pc.utf8_lpad(day, 2, "0"), part["time"], ""
    )
    rewritten = pd.Series(iso.to_numpy(zero_copy_only=False), index=rows, dtype="string")
    return rewritten.reindex(text.index)


def _day_first(part: dict[str, Any], name: str, date_format: str | None) -> bool:
    """Say whether day/month values are day-first: as the option says, or as they settle it.

    A first number over 12 settles day-first, a second one over 12 month-first; values that
    settle neither are day-first when all are dotted (``01.02.2025``), else refused.
    """
    if date_format in ORDERS:
        return date_format == "dayfirst"
    first, second = (pc.cast(part[k], pa.int32()).to_numpy() for k in ("first", "second"))
    day_seen, month_seen = np.flatnonzero(first > 12), np.flatnonzero(second > 12)

    def written(row: int) -> str:
        sep = part["sep"][row].as_py()
        return f"{part['first'][row]}{sep}{part['second'][row]}{sep}{part['year'][row]}"

    if len(day_seen) and len(month_seen):
        raise ToolError(
            f"column {name!r} mixes day-first (e.g. {written(day_seen[0])!r}) and "
            f"month-first (e.g. {written(month_seen[0])!r}) dates; {HINT}"
        )
    if len(day_seen) or len(month_seen):
        return bool(len(day_seen))
    if pc.all(pc.equal(part["sep"], ".")).as_py():
        return True
    raise ToolError(
        f"column {name!r}: dates like {written(0)!r} could be day- or month-first; {HINT}"
    )


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


def _excel(series: pd.Series[Any], name: str, date_format: str | None) -> Coerced:
    numbers = pd.to_numeric(series, errors="coerce")
    low, high = EXCEL_SERIALS
    inside = numbers.between(low, high)
    if date_format != "excel" and not bool(inside[numbers.notna()].all()):
        raise ToolError(f"column {name!r} holds numbers that are not Excel serial dates; {HINT}")
    dates = pd.to_datetime(numbers.where(inside), unit="D", origin="1899-12-30")
    return checked(name, series, dates, "dates", HINT)
