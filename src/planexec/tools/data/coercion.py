"""Turning text columns into numbers and dates: right, or an error that says what to pass.

One place for every tool: a coercion that would turn more than ``MAX_LOST_SHARE`` of a
column's values into nulls raises instead of quietly dropping them later as "null rows".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planexec.errors import ToolError
from planexec.tools.data.reading import is_text

MAX_LOST_SHARE = 0.05
CURRENCY = re.compile(r"[$€£¥₹]|\b(?:USD|EUR|GBP|CHF|JPY)\b")
CURRENCY_NAMES = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
SLASHED = re.compile(r"^\s*(\d{1,2})([/.-])(\d{1,2})\2(\d{2,4})(?:[ T].*)?$")
EXCEL_SERIALS = (20_000, 80_000)  # 1954-10-03 .. 2119-01-10: other numbers are not dates


@dataclass
class Coerced:
    """A converted column and what the conversion lost."""

    values: pd.Series[Any]
    lost: int = 0
    examples: list[str] = field(default_factory=list)
    unit: str | None = None


def _check(
    name: str, before: pd.Series[Any], after: pd.Series[Any], what: str, hint: str
) -> Coerced:
    lost_mask = before.notna() & after.isna()
    lost, present = int(lost_mask.sum()), int(before.notna().sum())
    examples = [str(v)[:30] for v in before[lost_mask].unique()[:3]]
    if present and lost > MAX_LOST_SHARE * present:
        raise ToolError(
            f"column {name!r}: {lost:,} of {present:,} values are not {what} "
            f"(e.g. {', '.join(map(repr, examples))}); {hint}"
        )
    return Coerced(after, lost, examples)


def number_pattern(mark: str) -> str:
    """Return the regex of a number written with decimal ``mark`` (and the other as thousands)."""
    m, t = re.escape(mark), re.escape("," if mark == "." else ".")
    whole = rf"(?:\d{{1,3}}(?:[{t}'\s\u00a0\u202f]\d{{3}})+|\d+)"
    return rf"^[+-]?(?:{whole}(?:{m}\d*)?|{m}\d+)(?:[eE][+-]?\d+)?%?$"


def as_numbers(series: pd.Series[Any], name: str, decimal: str = ".") -> Coerced:
    """Return the column as numbers: currency symbols, thousands separators, (negatives) read.

    Each value must be a whole number in one notation: the decimal mark that reads more of
    the column's values wins (the file's own mark on a tie, as "1,234" reads both ways).
    """
    if pd.api.types.is_bool_dtype(series.dtype) or not (
        is_text(series) or pd.api.types.is_numeric_dtype(series.dtype)
    ):
        raise ToolError(f"column {name!r} holds {series.dtype} values, not numbers")
    if not is_text(series):
        numeric = pd.to_numeric(series, errors="coerce")
        return _check(
            name, series, numeric.where(np.isfinite(numeric)), "finite numbers", "fix them"
        )
    text = series.astype("string")
    symbols = text.str.extract(f"({CURRENCY.pattern})", expand=False).dropna().unique()
    stripped = text.str.replace(CURRENCY, "", regex=True).str.strip()
    negative = (stripped.str.startswith("(") & stripped.str.endswith(")")).fillna(False)
    bare = stripped.where(~negative, stripped.str.slice(1, -1).str.strip())
    bare = bare.str.replace(r"^([+-])\s+", r"\1", regex=True)  # "- 5" after "-$5"
    sample = bare.dropna().head(5000)
    votes = {m: int(sample.str.match(number_pattern(m)).sum()) for m in (".", ",")}
    default = decimal if decimal in votes else "."
    mark = max(votes, key=lambda m: (votes[m], m == default))
    plain = (
        bare.where(bare.str.match(number_pattern(mark)))
        .str.replace(r"[%'\s\u00a0\u202f]", "", regex=True)
        .str.replace("," if mark == "." else ".", "", regex=False)
        .str.replace(mark, ".", regex=False)
    )
    numbers = pd.to_numeric(plain, errors="coerce").astype("float64")
    numbers = numbers.where(~negative, -numbers)
    numbers = numbers.where(np.isfinite(numbers))
    result = _check(
        name, series, numbers, "numbers", 'pass numeric_columns without it, or options.decimal=","'
    )
    if len(symbols) == 1:
        result.unit = CURRENCY_NAMES.get(str(symbols[0]), str(symbols[0]))
    return result


def as_dates(series: pd.Series[Any], name: str, date_format: str | None = None) -> Coerced:
    """Return the column as UTC dates (no zone): ISO, day/month-first, Excel serials."""
    hint = 'pass options.date_format ("dayfirst", "monthfirst", "excel" or e.g. "%d.%m.%Y")'
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return Coerced(_naive_utc(series))
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return _excel(series, name, date_format, hint)
    if not is_text(series):
        raise ToolError(f"column {name!r} holds {series.dtype} values, not dates")
    text = series.astype("string")
    if date_format == "excel":
        return _excel(pd.to_numeric(text, errors="coerce"), name, date_format, hint)
    fmt = _text_format(text, name, date_format, hint)
    try:
        parsed = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
    except ValueError as exc:  # a bad strftime directive given in options.date_format
        raise ToolError(f"column {name!r}: date_format {fmt!r} is not usable: {exc}") from None
    return _check(name, series, _naive_utc(parsed), "dates", hint)


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
    return _check(name, series, dates, "dates", hint)


def _naive_utc(series: pd.Series[Any]) -> pd.Series[Any]:
    if getattr(series.dt, "tz", None) is not None:
        converted: pd.Series[Any] = series.dt.tz_convert("UTC").dt.tz_localize(None)
        return converted
    return series


def finite(value: Any) -> float | None:
    """Return a JSON-safe rounded number (None for NaN or infinity)."""
    number = float(value)
    return round(number, 4) if np.isfinite(number) else None
