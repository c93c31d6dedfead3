"""Data-analysis toolkit: load, clean, summarise, find trends, chart and report.

Datasets move between steps as files in the workspace (CSV, TSV, .xlsx in; Parquet after
cleaning); tools return small JSON summaries whose ``dataset`` or ``path`` fields name those
files. Every messy input is read right or refused with one line saying what to pass.
"""

from __future__ import annotations

from planexec.tools.data.charts import generate_chart
from planexec.tools.data.cleaning import clean_data
from planexec.tools.data.loading import load_csv
from planexec.tools.data.reading import ReadOptions, read_dataset
from planexec.tools.data.report import write_report
from planexec.tools.data.stats import calculate_stats
from planexec.tools.data.trends import detect_trends

DATA_TOOLS = [load_csv, calculate_stats, detect_trends]
SIDE_EFFECT_DATA_TOOLS = [clean_data, generate_chart, write_report]
FILE_FIELDS: dict[str, tuple[str, ...]] = {
    "load_csv": ("dataset",),
    "clean_data": ("dataset",),
    "generate_chart": ("path",),
    "write_report": ("path",),
}
"""Output fields of these tools that name workspace files."""

__all__ = [
    "DATA_TOOLS",
    "FILE_FIELDS",
    "SIDE_EFFECT_DATA_TOOLS",
    "ReadOptions",
    "calculate_stats",
    "clean_data",
    "detect_trends",
    "generate_chart",
    "load_csv",
    "read_dataset",
    "write_report",
]
