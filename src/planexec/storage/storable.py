"""What a checkpoint can store: one rule for every value that reaches planexec's state.

LangGraph's checkpoint serializer (msgpack) refuses integers outside 64 bits and values
nested more than a few hundred levels; PostgreSQL's JSONB refuses the NUL character; no
serializer stores a lone surrogate. A value that reaches state in such a form makes every
later write of that thread fail. So values are handled where they enter:

* what people send (tasks, resume answers, edited plans) is **checked** with
  :func:`unstorable_reason` and refused with a clear message when it cannot be stored;
* what tools and models return is **converted** with :func:`to_storable`, by this rule:

  ==========================================  ===============================================
  value                                       stored as
  ==========================================  ===============================================
  ``None``, ``bool``, ``str``                 itself (NUL → U+FFFD, lone surrogates → U+FFFD)
  ``int`` (and numpy integers)                itself within 64 bits, else its decimal text
  ``float`` (and numpy floats)                itself if finite, else ``None``
  ``decimal.Decimal``                         its exact decimal text (``"1234.50"``)
  ``datetime``/``date``/``time``              ISO 8601 text (pandas ``Timestamp``, numpy
                                              ``datetime64`` too)
  ``timedelta``                               seconds, as a float (numpy ``timedelta64`` too)
  pandas ``NaT``/``NA``                       ``None``
  ``bytes``/``bytearray``                     UTF-8 text if it decodes, else base64 text
  ``set``/``frozenset``                       a list, sorted when its items can be
  ``tuple``/``list``/numpy array              a list
  pandas ``Series``/``DataFrame``             its ``to_dict()``: labels become text keys
  ``dict`` (any mapping)                      a dict with text keys
  pydantic model, dataclass                   its fields, converted by the same rule
  ``enum.Enum``                               its value; ``pathlib.Path``: its text
  ==========================================  ===============================================

  Anything else, or a value nested deeper than :data:`MAX_DEPTH`, raises
  :class:`UnstorableValueError` naming what and where, and only the step that produced
  it fails.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import math
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from planexec.errors import PlanexecError

MAX_DEPTH = 64
"""Deepest nesting kept (LangGraph's serializer fails at about 250 levels)."""
INT_MIN, INT_MAX = -(2**63), 2**64 - 1
"""The integers a checkpoint stores (msgpack's signed and unsigned 64-bit range)."""
REPLACEMENT = "\ufffd"
_MISSING = frozenset({"NaTType", "NAType"})
"""pandas' missing values (``pd.NaT``, ``pd.NA``): stored as None."""


class UnstorableValueError(PlanexecError, ValueError):
    """A value cannot be stored in a checkpoint; the message says what and where."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Replace each NUL and each lone surrogate by one U+FFFD (as stored text has them)."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text


def _where(path: tuple[str, ...]) -> str:
    """Name a place in a value: ``['rows'][0]['x']`` (the middle of a long path elided)."""
    parts = [f"[{p!r}]" if not p.isdigit() else f"[{p}]" for p in path]
    if len(parts) > 8:
        parts = [*parts[:3], f"…({len(parts) - 6} more)…", *parts[-3:]]
    return "".join(parts) or "the value"


def to_storable(value: Any) -> Any:
    """Convert a tool's or model's value to JSON data a checkpoint stores (see the module rule).

    Raises :class:`UnstorableValueError` for a value the rule does not cover.
    """
    return _convert(value, None, 0)


_Path = tuple["_Path", str] | None
"""Where a value sits, as a chain of (parent, key) links: O(1) to extend, unrolled on error."""


def _keys(path: _Path) -> tuple[str, ...]:
    keys: list[str] = []
    while path is not None:
        path, key = path
        keys.append(key)
    return tuple(reversed(keys))


def _convert(value: Any, path: _Path, depth: int) -> Any:  # one table
    if depth > MAX_DEPTH:
        raise UnstorableValueError(
            f"{_where(_keys(path))} is nested more than {MAX_DEPTH} levels deep; "
            "keep deep data in a workspace file"
        )
    kind = type(value)
    if kind is str:  # the common JSON types first, by exact type (subclasses go below)
        return clean_text(value)
    if kind is dict:
        return {
            clean_text(k) if type(k) is str else clean_text(str(k)): _convert(
                v, (path, str(k)), depth + 1
            )
            for k, v in value.items()
        }
    if kind is list:
        return [_convert(v, (path, str(i)), depth + 1) for i, v in enumerate(value)]
    if value is None or kind is bool:
        return value
    if kind is int:
        return value if INT_MIN <= value <= INT_MAX else _int_text(value, path)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind.__name__ in _MISSING:  # before datetime: pandas' NaT is a datetime
        return None
    if isinstance(value, str):
        return clean_text(str(value))
    if isinstance(value, int):
        number = int(value)
        return number if INT_MIN <= number <= INT_MAX else _int_text(number, path)
    if isinstance(value, float):
        real = float(value)
        return real if math.isfinite(real) else None
    if isinstance(value, decimal.Decimal):
        return str(value) if value.is_finite() else None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return clean_text(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, enum.Enum):
        return _convert(value.value, path, depth + 1)
    if isinstance(value, PurePath):
        return clean_text(str(value))
    if isinstance(value, BaseModel):
        return _convert(value.model_dump(mode="python"), path, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert(dataclasses.asdict(value), path, depth + 1)
    if isinstance(value, Mapping):
        return {
            clean_text(str(k)): _convert(v, (path, str(k)), depth + 1) for k, v in value.items()
        }
    if isinstance(value, set | frozenset):
        items = list(value)
        with contextlib.suppress(TypeError):
            items.sort()
        return [_convert(v, (path, str(i)), depth + 1) for i, v in enumerate(items)]
    if isinstance(value, list | tuple):
        return [_convert(v, (path, str(i)), depth + 1) for i, v in enumerate(value)]
    if kind.__module__.split(".")[0] in {"numpy", "pandas"}:
        converted = _from_numpy_or_pandas(value)
        if converted is not value:
            return _convert(converted, path, depth + 1)
    raise UnstorableValueError(
        f"{_where(_keys(path))} is a {kind.__module__}.{kind.__qualname__}, which is not "
        "JSON data; tools must return dicts, lists, text, numbers, dates or bytes and keep "
        "large data in workspace files"
    )


def _int_text(number: int, path: _Path) -> str:
    """Write an integer beyond 64 bits as decimal text (refused past Python's digit limit)."""
    try:
        return str(number)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        raise UnstorableValueError(
            f"{_where(_keys(path))} is an integer too long to write out"
        ) from None


def storable_text(text: str, limit: int = 4000) -> str:
    """Return message text (an error, a summary) as stored: cleaned like any text, cut to ``limit``.

    Messages quote tools and models; they are text that reaches state, so they follow the rule.
    """
    clean = clean_text(str(text))
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _from_numpy_or_pandas(value: Any) -> Any:
    """Turn numpy scalars/arrays and pandas scalars/containers into Python values."""
    kind = type(value).__name__
    if kind in ("datetime64", "timedelta64"):  # tolist() would give nanoseconds as an int
        import numpy as np

        if np.isnat(value):
            return None
        if kind == "timedelta64":
            return float(value / np.timedelta64(1, "s"))
        return str(np.datetime_as_string(value))
    for name in ("isoformat", "to_dict", "tolist", "item"):  # to_dict keeps pandas' labels
        method = getattr(value, name, None)
        if callable(method):
            try:
                return method()
            except (TypeError, ValueError):
                continue
    return value


def text_size(value: Any) -> int:
    """Count the characters of text in ``value`` (strings and keys; 8 per other scalar)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, BaseMessage):
            stack.append(item.model_dump())
        else:
            total += 8
    return total


def unstorable_reason(value: Any) -> str | None:
    """Say why a value someone sent cannot be stored as it is (None when it can).

    Checked, not converted: an answer or plan is refused rather than changed behind its
    author's back. JSON data only, integers within 64 bits, no NUL or lone surrogates,
    at most :data:`MAX_DEPTH` levels deep.
    """
    stack: list[tuple[Any, tuple[str, ...], int]] = [(value, (), 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{_where(path)} is nested more than {MAX_DEPTH} levels deep"
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if "\x00" in item:
                return f"{_where(path)} contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{_where(path)} contains a lone surrogate (not valid Unicode)"
        elif isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                return f"{_where(path)} is an integer outside the 64-bit range"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{_where(path)} is {item!r}, which is not a JSON number"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"{_where(path)} has a key that is not text: {key!r}"
                stack.append((key, (*path, "<key>"), depth + 1))
                stack.append((child, (*path, key), depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, str(i)), depth + 1) for i, child in enumerate(item))
        elif isinstance(item, BaseMessage):  # LangGraph stores chat messages: check their fields
            stack.append((item.model_dump(), path, depth + 1))
        else:
            return f"{_where(path)} is a {type(item).__name__}, which is not JSON data"
    return None
