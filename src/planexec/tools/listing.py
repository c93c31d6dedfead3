"""The planner's view of the workspace: its files, and for tables their columns.

Everything taken from a file (its name, column names, values) is escaped onto one line and
cut to a bounded length, so a file cannot add lines (instructions) to the planner's prompt.
"""

from __future__ import annotations

import json
import os
import threading
import time
from itertools import islice
from pathlib import Path
from typing import Any

import pandas as pd

from planexec.errors import PlanexecError
from planexec.tools.data.coercion import as_numbers
from planexec.tools.data.dates import as_dates, clock
from planexec.tools.data.reading import EXCEL_SUFFIXES, TEXT_SUFFIXES, is_text, read_dataset
from planexec.tools.workspace import Workspace, use_workspace

MAX_LISTED_FILES = 50
MAX_PROFILED_FILES = 10
MAX_COLUMNS = 25
SAMPLE_ROWS = 50
TABLE_SUFFIXES = (TEXT_SUFFIXES - {"", ".txt", ".dat"}) | EXCEL_SUFFIXES | {".parquet"}
MAX_REMEMBERED_PROFILES = 512
"""Table profiles kept for files that have not changed (each is one bounded line)."""

SETTLED_NS = 3_000_000_000
"""A file changed less long ago is profiled every time: a file system keeps times coarsely
(to the tick, or to the second or two), so a rewrite that soon may leave its times as they were."""

_profiles: dict[tuple[object, ...], str] = {}
_profiles_lock = threading.Lock()


def escaped(text: object, limit: int = 40) -> str:
    """Return text as one JSON-quoted line of at most about ``limit`` characters."""
    raw = str(text)
    cut = raw if len(raw) <= limit else raw[: limit - 1] + "…"
    return json.dumps(cut, ensure_ascii=False)


def _plain(name: str) -> str:
    """Return a file name as is when it is harmless, else escaped."""
    return name if name.isprintable() and len(name) <= 120 else escaped(name, 120)


def column_kind(series: pd.Series[Any], name: str) -> str:
    """Say how the data tools will read a column: number (and currency), date, or text."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return "boolean"
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return "date"
    if pd.api.types.is_numeric_dtype(series.dtype):
        return "number"
    if not is_text(series) or series.notna().sum() == 0:
        return str(series.dtype)
    try:
        numbers = as_numbers(series, name)
        if not numbers.lost:
            return f"number ({numbers.unit})" if numbers.unit else "number"
    except PlanexecError:
        pass
    try:
        dates = as_dates(series, name)
        if not dates.lost:
            return f"date ({clock(dates)})" if dates.time else "date"
    except PlanexecError as exc:
        if "day- or month-first" in str(exc):
            return "date (day/month order unclear)"
    return "text"


def table_profile(workspace: Workspace, relative: str) -> str:
    """Return a line's tail naming a table's columns, their kinds and two sample values each."""
    try:
        with use_workspace(workspace):
            frame, source = read_dataset(relative, nrows=SAMPLE_ROWS)
    except PlanexecError as exc:
        return f"; not readable as a table: {escaped(exc, 160)}"
    shown = []
    for col in list(frame.columns)[:MAX_COLUMNS]:
        samples = ", ".join(escaped(v, 24) for v in frame[col].dropna().head(2).astype(str))
        shown.append(f"{escaped(col)} {column_kind(frame[col], str(col))} e.g. {samples or '—'}")
    more = (
        f"; … {len(frame.columns) - MAX_COLUMNS} more" if len(frame.columns) > MAX_COLUMNS else ""
    )
    how = (
        f" delimiter {escaped(source.delimiter, 4)}" if source.delimiter not in {None, ","} else ""
    )
    return f"; columns{how}: " + "; ".join(shown) + more


def remembered_profile(workspace: Workspace, info: os.stat_result, relative: str) -> str:
    """Return :func:`table_profile`, read again only when the file has changed.

    A file is known by its device, inode, size and modification and change times (ns), and
    remembered only once those times are :data:`SETTLED_NS` old (as git treats "racily clean"
    files), so a rewrite always shows. Reading a table to profile it is what delays a
    planner's first token in a workspace with tables.
    """
    if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < SETTLED_NS:
        return table_profile(workspace, relative)
    key = (
        str(workspace.root),
        relative,
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )
    with _profiles_lock:
        known = _profiles.get(key)
    if known is not None:
        return known
    line = table_profile(workspace, relative)
    with _profiles_lock:
        if len(_profiles) >= MAX_REMEMBERED_PROFILES:
            del _profiles[next(iter(_profiles))]  # the oldest
        _profiles[key] = line
    return line


def workspace_files(workspace: Workspace) -> str:
    """List (some of) the workspace's files for the planner's prompt, tables with columns."""
    files = list(islice(workspace.files(), MAX_LISTED_FILES + 1))
    found, profiled = [], 0
    for relative in files[:MAX_LISTED_FILES]:
        try:
            info = workspace.info(relative)
        except PlanexecError:  # swapped for a link or a special file since it was listed
            continue
        if info is None:  # gone since it was listed
            continue
        line = f"- {_plain(relative)} ({info.st_size} bytes)"
        if Path(relative).suffix.lower() in TABLE_SUFFIXES and profiled < MAX_PROFILED_FILES:
            profiled += 1
            line += remembered_profile(workspace, info, relative)
        found.append(line)
    if len(files) > MAX_LISTED_FILES:
        found.append("- …")
    return "\n".join(found) or "(empty)"
