"""The ``clean_data`` tool: trim, convert, dedupe, drop incomplete rows, save as Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.errors import ToolError
from planexec.tools.data.coercion import as_numbers
from planexec.tools.data.columns import DATES, UNITS, Columns
from planexec.tools.data.dates import utc_offsets
from planexec.tools.data.reading import ReadOptions, SourceInfo, is_text, read_dataset
from planexec.tools.workspace import current_workspace


class Removed(TypedDict):
    """Rows removed, and why."""

    rows: int
    why: str


class Nulled(TypedDict):
    """Values of a column that could not be read as its type, and examples of them."""

    nulled: int
    examples: list[str]


class Cleaned(TypedDict):
    """What ``clean_data`` returns: the new dataset's path and what was removed and why."""

    dataset: str
    rows_before: int
    rows_after: int
    removed_duplicates: int
    removed_null_rows: int
    removed: list[Removed]
    unreadable_values: dict[str, Nulled]
    converted: dict[str, str]
    source: SourceInfo
    columns: dict[str, str]


def _require(frame: pd.DataFrame, names: list[str] | None) -> list[str]:
    for name in names or []:
        if name not in frame.columns:
            raise ToolError(f"no column {name!r} (columns: {', '.join(map(str, frame.columns))})")
    return list(names or [])


def _convert(
    cols: Columns, dates: list[str], numbers: list[str] | None, options: ReadOptions | None
) -> dict[str, str]:
    frame, converted = cols.frame, {}
    for col in dates:
        written = frame[col]
        frame[col] = cols.dates(col, options)
        converted[col] = _dates_kept(cols, col, written, options)
    candidates = (
        numbers
        if numbers is not None
        else [
            c
            for c in frame.columns
            if c not in dates and is_text(frame[c]) and frame[c].notna().any()
        ]
    )
    for col in candidates:
        try:
            if numbers is None:  # a sample first: a text column costs no full regex pass
                as_numbers(frame[col].dropna().head(1000), col, cols.source.decimal)
            coerced = as_numbers(frame[col], col, cols.source.decimal)
        except ToolError:
            if numbers is not None:
                raise
            continue  # a text column that is not numbers stays text
        if numbers is None and coerced.lost:
            continue  # guessed columns convert only whole: an id with a few letters stays text
        frame[col] = coerced.values
        cols.note(col, coerced)
        converted[col] = "number" + (f" ({cols.unit(col)})" if cols.unit(col) else "")
    return converted


def _dates_kept(
    cols: Columns, col: str, written: pd.Series[Any], options: ReadOptions | None
) -> str:
    """Keep a converted date column's UTC offsets as written, next to it; say what was done.

    Local times (the default) keep their offsets in ``<col>_utc_offset``: the same wall time
    at two offsets (the hour that repeats when summer time ends) is two moments, not a
    duplicate, and a later step may still convert to UTC from the cleaned file's source.
    """
    said = cols.time(col)
    if options is not None and options.utc:
        return "datetime (UTC)"
    offsets = utc_offsets(written) if said else None  # None: no offsets read as such
    if offsets is None:
        return f"datetime ({said.split(';')[0]})" if said else "datetime"
    name = f"{col}_utc_offset"
    while name in cols.frame.columns:
        name += "_"
    cols.frame.insert(list(cols.frame.columns).index(col) + 1, name, offsets.to_numpy())
    return f"datetime ({(said or 'local time').split(';')[0]}; its offsets in {name!r})"


@tool
def clean_data(
    dataset: str,
    output_path: str | None = None,
    required_columns: list[str] | None = None,
    dedupe_on: list[str] | None = None,
    date_columns: list[str] | None = None,
    numeric_columns: list[str] | None = None,
    options: ReadOptions | None = None,
) -> Cleaned:
    """Clean a dataset and save it as Parquet.

    In order: trims text, converts date_columns to dates and numeric_columns to numbers
    (by default columns named like "date" become dates, and text columns of numbers,
    currency amounts included, become numbers). Dates with UTC offsets keep the local date
    and time written, their offsets in a "<column>_utc_offset" column next to them
    (options.utc=true: converted to UTC instead). A conversion that would turn more than 5%
    of a column's values into nulls is refused with what to pass instead. Then drops
    duplicate rows (equal in dedupe_on, or in every column) and rows with a null in
    required_columns (default: any column). Returns the new dataset's path and what was
    removed and why.
    """
    frame, source = read_dataset(dataset, options=options)
    before = len(frame)
    dates = (
        _require(frame, date_columns)
        if date_columns is not None
        else [str(c) for c in frame.columns if "date" in str(c).lower()]
    )
    columns = list(map(str, frame.columns))
    cols = Columns(frame, source)
    converted = _convert(
        cols,
        dates,
        _require(frame, numeric_columns) if numeric_columns is not None else None,
        options,
    )
    deduped = frame.drop_duplicates(subset=_require(frame, dedupe_on) or None)
    required = _require(frame, required_columns) or columns  # not the offsets: may be blank
    incomplete = deduped[required].isna()
    cleaned = deduped[~incomplete.any(axis=1)].reset_index(drop=True)
    workspace = current_workspace()
    target = output_path or f"{Path(dataset).with_suffix('').as_posix()}.clean.parquet"
    cleaned.attrs = {
        UNITS: {c: u for c in cleaned.columns if (u := cols.unit(str(c)))},
        DATES: {c: t for c in dates if (t := cols.time(c))},
    }
    with workspace.open_write(target) as out:
        cleaned.to_parquet(out, index=False)
    same = ", ".join(dedupe_on) if dedupe_on else "values in every column"
    removed = [Removed(rows=before - len(deduped), why=f"duplicate rows (same {same})")]
    first_missing = incomplete.idxmax(axis=1)[incomplete.any(axis=1)].value_counts()
    removed += [
        Removed(rows=int(n), why=f"no value in {col!r}") for col, n in first_missing.items()
    ]
    return {
        "dataset": workspace.name(target),
        "rows_before": before,
        "rows_after": len(cleaned),
        "removed_duplicates": before - len(deduped),
        "removed_null_rows": len(deduped) - len(cleaned),
        "removed": [r for r in removed if r["rows"]],
        "unreadable_values": {
            c: Nulled(nulled=v.lost, examples=v.examples) for c, v in cols.lost.items() if v.lost
        },
        "converted": converted,
        "source": source.info(),
        "columns": {str(c): str(t) for c, t in cleaned.dtypes.items()},
    }
