"""Reading a workspace file (CSV and other delimited text, Parquet, Excel) right or not at all."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, BinaryIO, Literal

import pandas as pd
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from planexec.errors import ToolError
from planexec.tools.data import sniffing
from planexec.tools.workspace import current_workspace

TEXT_SUFFIXES = {".csv", ".tsv", ".txt", ".dat", ""}
EXCEL_SUFFIXES = {".xlsx", ".xlsm"}


class ReadOptions(BaseModel):
    """How to read a file, when sniffing it is not enough (every field optional)."""

    delimiter: str | None = Field(None, description='field separator, e.g. ";" or "\\t"')
    decimal: Literal[".", ","] | None = Field(None, description="decimal mark of numbers")
    encoding: str | None = Field(None, description='text encoding, e.g. "latin-1", "utf-16"')
    sheet: str | int | None = Field(None, description="Excel sheet name or 0-based index")
    date_format: str | None = Field(
        None,
        description='"dayfirst", "monthfirst", "excel" (serial numbers) or a strftime format',
    )
    utc: bool = Field(
        False,
        description="true: dates with UTC offsets or a time zone are converted to UTC (months "
        "are UTC months); default: the local date and time written in the data",
    )


@dataclass(frozen=True)
class Source:
    """How a file was read: the values that sniffing chose or the caller gave."""

    format: str
    encoding: str | None = None
    delimiter: str | None = None
    decimal: str = "."

    def info(self) -> SourceInfo:
        """Return how the file was read, as tools report it (``source``)."""
        return SourceInfo(
            format=self.format,
            encoding=self.encoding,
            delimiter=self.delimiter,
            decimal=self.decimal,
        )


class SourceInfo(TypedDict):
    """How a file was read, as ``load_csv`` and ``clean_data`` report it."""

    format: str
    encoding: str | None
    delimiter: str | None
    decimal: str


def read_dataset(
    dataset: str,
    columns: Sequence[str] | None = None,
    options: ReadOptions | None = None,
    nrows: int | None = None,
) -> tuple[pd.DataFrame, Source]:
    """Read a workspace file (only ``columns``, if given); refuse what cannot be read right."""
    opts = options or ReadOptions()
    suffix = PurePosixPath(current_workspace().name(dataset)).suffix.lower()
    with current_workspace().open_read(dataset) as handle:  # the readers get this handle
        frame, source = _read(handle, dataset, suffix, columns, opts, nrows)
    if columns:
        frame = frame[list(columns)]
    if frame.empty and len(frame.columns) and nrows != 0:
        raise ToolError(f"{dataset!r} has a header but no rows of data")
    return _trimmed(frame), source


def _read(
    handle: BinaryIO,
    dataset: str,
    suffix: str,
    columns: Sequence[str] | None,
    opts: ReadOptions,
    nrows: int | None,
) -> tuple[pd.DataFrame, Source]:
    try:
        if suffix == ".parquet":
            return _read_parquet(handle, columns, nrows), Source("parquet")
        if suffix in EXCEL_SUFFIXES:
            return _read_excel(handle, columns, opts, nrows), Source("excel")
        if suffix == ".xls":
            raise ToolError(f"{dataset!r} is an old .xls workbook: save it as .xlsx or CSV")
        if suffix in TEXT_SUFFIXES:
            return _read_text(handle, dataset, columns, opts, nrows)
        raise ToolError(f"{dataset!r}: not a table (read CSV, TSV, .xlsx or Parquet files)")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{dataset!r} is not valid {exc.encoding} text: pass options.encoding "
            '(e.g. "latin-1", "cp1252", "utf-16")'
        ) from None
    except LookupError as exc:  # an unknown encoding name
        raise ToolError(f"cannot read {dataset!r}: {exc}") from None
    except (ValueError, TypeError, OSError, KeyError, pd.errors.ParserError) as exc:
        missing = _missing(dataset, columns, opts) if columns else None
        if missing:
            raise ToolError(missing) from None
        raise ToolError(f"cannot read {dataset!r} as a table: {exc}") from None


def _listed(columns: Sequence[str] | None) -> list[str] | None:
    return list(dict.fromkeys(columns)) if columns else None


def _missing(dataset: str, wanted: Sequence[str], opts: ReadOptions) -> str | None:
    """Name the first wanted column the file does not have, and the ones it has."""
    found = [str(c)[:40] for c in read_dataset(dataset, options=opts, nrows=0)[0].columns]
    absent = [c for c in wanted if c not in found]
    if not absent:
        return None
    shown = ", ".join(found[:30]) + (f", … {len(found) - 30} more" if len(found) > 30 else "")
    return f"no column {absent[0]!r} in {dataset!r} (columns: {shown})"


def _read_parquet(
    handle: BinaryIO, columns: Sequence[str] | None, nrows: int | None
) -> pd.DataFrame:
    if nrows is None:
        return pd.read_parquet(handle, columns=_listed(columns))
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    batches = pq.ParquetFile(handle).iter_batches(
        batch_size=max(nrows, 1), columns=_listed(columns)
    )
    first = next(batches, None)
    if first is None:
        handle.seek(0)
        return pd.read_parquet(handle, columns=_listed(columns))
    head: pd.DataFrame = first.to_pandas().head(nrows)
    return head


def _read_excel(
    handle: BinaryIO, columns: Sequence[str] | None, opts: ReadOptions, nrows: int | None
) -> pd.DataFrame:
    sheet = opts.sheet if opts.sheet is not None else 0
    return pd.read_excel(
        handle, sheet_name=sheet, usecols=_listed(columns), nrows=nrows, engine="openpyxl"
    )


def _read_text(
    handle: BinaryIO,
    dataset: str,
    columns: Sequence[str] | None,
    opts: ReadOptions,
    nrows: int | None,
) -> tuple[pd.DataFrame, Source]:
    head = handle.read(sniffing.SAMPLE_BYTES)
    handle.seek(0)
    if not head.strip():
        raise ToolError(f"{PurePosixPath(dataset).name!r} is empty")
    encoding = opts.encoding or sniffing.sniff_encoding(head)
    sample = head.decode(encoding, errors="ignore")
    delimiter = opts.delimiter or sniffing.sniff_delimiter(sample)
    decimal = opts.decimal or sniffing.sniff_decimal(sample, delimiter)
    frame = pd.read_csv(
        handle,
        sep=delimiter,
        decimal=decimal,
        encoding=encoding,
        usecols=_listed(columns),
        nrows=nrows,
        quoting=csv.QUOTE_MINIMAL,
    )
    return frame, Source("text", encoding, delimiter, decimal)


def is_text(series: pd.Series[Any]) -> bool:
    """Say whether a column holds text (object or any pandas string dtype)."""
    return pd.api.types.is_object_dtype(series.dtype) or pd.api.types.is_string_dtype(series.dtype)


def _trimmed(frame: pd.DataFrame) -> pd.DataFrame:
    """Strip the spaces around text values; a blank value is a missing one."""
    for col in frame.columns:
        if is_text(frame[col]) and _all_text(frame[col]) and _needs_trim(frame[col]):
            frame[col] = frame[col].str.strip().replace("", None)
    return frame


def _needs_trim(series: pd.Series[Any]) -> bool:
    """Say whether any distinct value has spaces around it or is blank (no column copy)."""
    distinct = pd.Series(series.unique()).dropna().astype("string")
    return bool((distinct.str.strip() != distinct).any() or (distinct == "").any())


def _all_text(series: pd.Series[Any]) -> bool:
    return pd.api.types.is_string_dtype(series.dtype) or bool(
        series.map(lambda v: isinstance(v, str) or v is None or v != v).all()
    )
