"""The ``load_csv`` tool: read a table and profile it (types, nulls, duplicates, a sample)."""

from __future__ import annotations

import pandas as pd
from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.tools.data.reading import ReadOptions, SourceInfo, read_dataset
from planexec.tools.workspace import current_workspace


class Profile(TypedDict):
    """A table's profile: rows, column types, nulls, duplicate rows and a 3-row sample."""

    rows: int
    columns: dict[str, str]
    null_counts: dict[str, int]
    duplicate_rows: int
    sample: list[dict[str, str]]


class Loaded(Profile):
    """What ``load_csv`` returns: the table's workspace path, how it was read, its profile."""

    dataset: str
    source: SourceInfo


def duplicate_rows(frame: pd.DataFrame) -> int:
    """Count rows equal to an earlier row, exactly, at the cost of one hash per row.

    Rows are hashed first; only rows whose hash repeats are compared value by value.
    """
    if frame.empty:
        return 0
    hashes = pd.util.hash_pandas_object(frame, index=False)
    candidates = hashes.duplicated(keep=False)
    if not candidates.any():
        return 0
    return int(frame[candidates.to_numpy()].duplicated().sum())


def profile(frame: pd.DataFrame) -> Profile:
    """Return the rows, column types, null counts, duplicate rows and a 3-row sample."""
    return {
        "rows": len(frame),
        "columns": {str(c): str(t) for c, t in frame.dtypes.items()},
        "null_counts": {str(c): int(n) for c, n in frame.isna().sum().items() if n},
        "duplicate_rows": duplicate_rows(frame),
        "sample": [
            {str(k): str(v) for k, v in row.items()}
            for row in frame.head(3).astype(str).to_dict(orient="records")
        ],
    }


@tool
def load_csv(path: str, options: ReadOptions | None = None) -> Loaded:
    """Load a table of the workspace (CSV/TSV/any delimiter, .xlsx, Parquet) and profile it.

    The encoding (BOM included), delimiter and decimal mark are sniffed and reported under
    "source"; pass options to override them. A file it cannot read right is refused with
    what to pass. Returns rows, column types, nulls and duplicates.
    """
    frame, source = read_dataset(path, options=options)
    return Loaded(dataset=current_workspace().name(path), source=source.info(), **profile(frame))
