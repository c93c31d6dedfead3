"""Hypothesis strategies for what tools return and people send: JSON-ish and Python-ish values.

Includes, on purpose, everything a checkpoint cannot store as it is: numpy and pandas
scalars, big integers, NaN, NUL and lone surrogates, deep nesting, cycles, objects.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from pydantic import BaseModel


class Colour(enum.Enum):
    """An enum a tool might return."""

    RED = "red"
    BIG = 2**70


class Point(BaseModel):
    """A pydantic model a tool might return."""

    x: float
    label: str


@dataclasses.dataclass
class Box:
    """A dataclass a tool might return."""

    items: list[Any]
    name: str = "box"


class Opaque:
    """An object with no JSON form."""


def nested(depth: int) -> Any:
    """A value ``depth`` levels deep (lists and dicts alternating)."""
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def cyclic() -> list[Any]:
    """A list that contains itself."""
    value: list[Any] = []
    value.append(value)
    return value


any_text = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=8),  # lone surrogates too
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "x" * 300, "$1", "é€😀"]),
)
python_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    any_text,
    st.binary(max_size=12),
    st.decimals(),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.complex_numbers(),
    st.builds(np.float64, st.floats()),
    st.builds(np.float32, st.floats(width=32)),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.uint64, st.integers(0, 2**64 - 1)),
    st.builds(np.bool_, st.booleans()),
    st.builds(np.str_, st.text(max_size=5)),
    st.builds(
        np.datetime64, st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2200, 1, 1)), st.just("ns")
    ),
    st.builds(pd.Timestamp, st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2200, 1, 1))),
    st.builds(pd.Timedelta, st.timedeltas(dt.timedelta(days=-999), dt.timedelta(days=999))),
    st.sampled_from(
        [pd.NaT, pd.NA, np.nan, np.datetime64("NaT"), Colour.RED, Colour.BIG, PurePosixPath("a/b")]
    ),
    st.just(Opaque()),
    st.builds(Point, x=st.floats(), label=any_text),
)
python_values = (
    st.recursive(
        python_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner, inner),
            st.frozensets(st.integers() | st.text(max_size=3), max_size=3),
            st.sets(st.floats() | st.text(max_size=3), max_size=3),
            st.dictionaries(
                st.one_of(any_text, st.integers(), st.none(), st.floats()), inner, max_size=3
            ),
            st.builds(Box, st.lists(inner, max_size=2)),
            st.builds(lambda xs: np.array(xs), st.lists(st.floats(), max_size=4)),
            st.builds(lambda xs: pd.Series(xs, dtype="float64"), st.lists(st.floats(), max_size=4)),
        ),
        max_leaves=8,
    )
    | st.integers(55, 320).map(nested)
    | st.builds(cyclic)
)
