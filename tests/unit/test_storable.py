"""The one conversion rule for what tools and models return.

(planexec.storage.storable.to_storable)
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
from pathlib import PurePosixPath

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings

from planexec.storage.storable import MAX_DEPTH, UnstorableValueError, storable_text, to_storable
from planexec.storage.storable import unstorable_reason as reason
from tests.strategies import examples
from tests.value_strategies import Box, Point, cyclic, nested, python_values


class Size(enum.Enum):
    BIG = 2**70


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (np.float32(0.5), 0.5),
        (np.uint64(2**64 - 1), 2**64 - 1),
        (np.int64(-5), -5),
        (np.bool_(False), False),
        (np.datetime64("2024-01-02T03:04"), "2024-01-02T03:04"),
        (np.datetime64("NaT"), None),
        (np.timedelta64(90, "s"), 90.0),
        (pd.Timedelta(minutes=1), 60.0),
        (pd.NaT, None),
        (pd.NA, None),
        (pd.DataFrame({"a": [1, 2]}), {"a": {"0": 1, "1": 2}}),
        (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
        (decimal.Decimal("NaN"), None),
        (decimal.Decimal("-0.010"), "-0.010"),
        (dt.time(1, 2, 3), "01:02:03"),
        (dt.datetime(2024, 1, 2, tzinfo=dt.UTC), "2024-01-02T00:00:00+00:00"),
        (b"caf\xc3\xa9", "café"),
        (bytearray(b"\x00\x01"), "\ufffd\x01"),
        ({3, 1, 2}, [1, 2, 3]),
        (frozenset({1}), [1]),
        ({1: "a", None: "b", (1, 2): "c"}, {"1": "a", "None": "b", "(1, 2)": "c"}),
        (Size.BIG, str(2**70)),
        (PurePosixPath("a/b"), "a/b"),
        (Point(x=float("inf"), label="\x00"), {"x": None, "label": "\ufffd"}),
        (Box(items=[np.int64(1)]), {"items": [1], "name": "box"}),
        ("a\ud800b\udfff", "a\ufffdb\ufffd"),
        (float("-inf"), None),
        (-(2**63) - 1, str(-(2**63) - 1)),
    ],
)
def test_the_rule(value, stored):
    assert to_storable(value) == stored
    assert reason(to_storable(value)) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (object(), "the value is a builtins.object"),
        ({"rows": [1, {"x": 1j}]}, "['rows'][1]['x'] is a builtins.complex"),
        (nested(MAX_DEPTH + 1), "nested more than 64 levels deep"),
        (cyclic(), "nested more than 64 levels deep"),
        ({"n": 10**5000}, "['n'] is an integer too long to write out"),
    ],
)
def test_what_the_rule_does_not_cover_is_refused_with_where(value, message):
    with pytest.raises(UnstorableValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        to_storable(value)


def test_a_long_path_is_elided_in_the_message():
    with pytest.raises(UnstorableValueError) as caught:
        to_storable(nested(300))
    assert "more)…" in str(caught.value) and len(str(caught.value)) < 300


def test_message_text_is_cleaned_and_cut():
    assert storable_text("a\x00b") == "a\ufffdb"
    assert storable_text("x" * 10, limit=5) == "xxxx…"


@settings(max_examples=examples(300), deadline=None)
@given(python_values)
def test_whatever_is_converted_can_be_stored_and_converting_again_changes_nothing(value):
    try:
        stored = to_storable(value)
    except UnstorableValueError:
        return
    assert reason(stored) is None
    assert to_storable(stored) == stored  # stored values hold no NaN, so they compare equal
