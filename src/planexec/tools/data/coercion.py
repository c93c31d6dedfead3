"""Turning text columns into numbers: right, or an error that says what to pass.

One place for every tool: a coercion that would turn more than ``MAX_LOST_SHARE`` of a
column's values into nulls raises instead of quietly dropping them later as "null rows".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from planexec.errors import ToolError
from planexec.tools.data.reading import is_text

MAX_LOST_SHARE = 0.05
CURRENCY = re.compile(r"[$€£¥₹]|\b(?:USD|EUR|GBP|CHF|JPY)\b")
CURRENCY_NAMES = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}


@dataclass
class Coerced:
    """A converted column and what the conversion lost."""

    values: pd.Series[Any]
    lost: int = 0
    examples: list[str] = field(default_factory=list)
    unit: str | None = None
    time: str | None = None
    """For dates: which clock they are in, when the data says (UTC offsets, a zone)."""
    offsets: tuple[str, ...] = ()
    """For dates: the UTC offsets written in the column (``+01:00``), in order."""


def checked(
    name: str, before: pd.Series[Any], after: pd.Series[Any], what: str, hint: str
) -> Coerced:
    """Return the conversion, or raise if it nulled more than MAX_LOST_SHARE of the values."""
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


def per_unique(
    series: pd.Series[Any], convert: Callable[[pd.Series[Any]], pd.Series[Any]]
) -> pd.Series[Any]:
    """Apply ``convert`` to the column's distinct values only, then spread them back.

    Dates and amounts repeat: 10M rows of a year's dates are 365 strings to parse.
    """
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if len(uniques) == 0 or len(uniques) > len(series) // 2:
        return convert(series)
    converted = convert(pd.Series(uniques)).reset_index(drop=True)
    spread = converted.take(np.where(codes < 0, 0, codes)).set_axis(series.index)
    return spread.where(codes >= 0)


def _parse_numbers(text: pd.Series[Any], decimal: str) -> tuple[pd.Series[Any], list[str]]:
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
    overflowed = plain.notna() & numbers.isna()  # pandas 2 reads "1e400" as NaN, 3 as inf
    if overflowed.any():
        numbers = numbers.mask(overflowed, plain[overflowed].map(float).astype("float64"))
    return numbers.where(~negative, -numbers), [str(x) for x in symbols]


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
        return checked(
            name, series, numeric.where(np.isfinite(numeric)), "finite numbers", "fix them"
        )
    found: list[str] = []

    def parse(text: pd.Series[Any]) -> pd.Series[Any]:
        numbers, symbols = _parse_numbers(text.astype("string"), decimal)
        found.extend(symbols)
        return numbers

    numbers = per_unique(series, parse)  # ±inf where a number overflows a float
    symbols = sorted(set(found))
    if np.isinf(numbers).any():  # named as the non-text path names it, whatever read it
        result = checked(
            name, series, numbers.where(np.isfinite(numbers)), "finite numbers", "fix them"
        )
    else:
        hint = 'pass numeric_columns without it, or options.decimal=","'
        result = checked(name, series, numbers, "numbers", hint)
    if len(symbols) == 1:
        result.unit = CURRENCY_NAMES.get(str(symbols[0]), str(symbols[0]))
    return result


def finite(value: Any) -> float | None:
    """Return a JSON-safe rounded number (None for NaN or infinity)."""
    number = float(value)
    return round(number, 4) if np.isfinite(number) else None
