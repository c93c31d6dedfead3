"""Data toolkit at scale: rows x time x peak RSS per tool, with DuckDB on the same computation.

Each measurement runs in a fresh process (its own peak RSS). The file is a sales CSV of N rows
(date, product, region, quantity, unit_price, revenue with cents). "calculate_stats" computes
the total, mean, min, max, monthly totals and totals by product; DuckDB computes the same from
the same CSV (DECIMAL sums), and "exact" says whether every total matched to the cent.
Run: python bench/data_scale.py [--max-rows 1000000]   (needs duckdb: a bench-only dependency)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import table

SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
TOOLS = (
    "import only",
    "load_csv",
    "clean_data",
    "calculate_stats",
    "detect_trends",
    "generate_chart",
    "duckdb",
)


def make_csv(path: Path, rows: int) -> None:
    """Write a sales CSV of ``rows`` rows (a year of dates, 4 products, revenue in cents)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(rows)
    days = pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, rows), unit="D")
    cents = rng.integers(100, 200_000, rows) + (np.arange(rows) * 50 // rows)
    pd.DataFrame(
        {
            "date": days.strftime("%Y-%m-%d"),
            "product": rng.choice(["Widget A", "Widget B", "Gadget X", "Gizmo"], rows),
            "region": rng.choice(["North", "South", "East", "West"], rows),
            "quantity": rng.integers(1, 10, rows),
            "revenue": [f"{c // 100}.{c % 100:02}" for c in cents.tolist()],
        }
    ).to_csv(path, index=False)


def child(tool: str, folder: str) -> dict[str, Any]:
    """Run one tool on data.csv in ``folder``; return its time, peak RSS and totals."""
    from planexec.tools import data
    from planexec.tools.workspace import use_workspace

    start = time.perf_counter()
    out: dict[str, Any] = {}
    with use_workspace(folder):
        common = {"dataset": "data.csv", "value_column": "revenue", "date_column": "date"}
        if tool == "import only":  # the baseline: the interpreter with planexec and pandas
            out = {}
        elif tool == "load_csv":
            out = data.load_csv.invoke({"path": "data.csv"})
        elif tool == "clean_data":
            out = data.clean_data.invoke({"dataset": "data.csv", "output_path": "c.parquet"})
        elif tool == "calculate_stats":
            out = data.calculate_stats.invoke({**common, "group_by": "product"})
        elif tool == "detect_trends":
            out = data.detect_trends.invoke(common)
        elif tool == "generate_chart":
            out = data.generate_chart.invoke(
                {
                    "kind": "line",
                    "x": "date",
                    "y": "revenue",
                    "title": "t",
                    "dataset": "data.csv",
                    "output_path": "c.png",
                }
            )
        else:
            out = duck(Path(folder) / "data.csv")
    seconds = time.perf_counter() - start
    peak_mb = peak_rss_kb() / 1024
    return {"seconds": seconds, "rss_mb": peak_mb, "totals": totals(out)}


def peak_rss_kb() -> int:
    """Return this process's peak RSS: VmHWM, not ru_maxrss (which keeps the parent's peak
    across fork and exec, and so would charge the CSV generator's memory to every tool)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def duck(path: Path) -> dict[str, Any]:
    """The same figures as calculate_stats, from DuckDB with DECIMAL sums."""
    import duckdb

    con = duckdb.connect()
    rel = f"read_csv('{path}', types={{'revenue': 'DECIMAL(18,2)'}})"
    total, mean, low, high = con.execute(
        f"select sum(revenue), avg(revenue), min(revenue), max(revenue) from {rel}"
    ).fetchone() or (0, 0, 0, 0)
    months = con.execute(
        f"select strftime(date, '%Y-%m'), sum(revenue) from {rel} group by 1 order by 1"
    ).fetchall()
    groups = con.execute(f"select product, sum(revenue) from {rel} group by 1").fetchall()
    return {
        "total": str(total),
        "by_period": [{"period": m, "value": str(v)} for m, v in months],
        "breakdown": [{"group": g, "value": str(v)} for g, v in groups],
    }


def totals(out: dict[str, Any]) -> dict[str, str] | None:
    """Return the total, monthly and product sums to the cent (None if the tool has none)."""
    if "total" not in out:
        return None
    cents = lambda v: str(Decimal(str(v)).quantize(Decimal("0.01")))  # noqa: E731
    found = {"total": cents(out["total"])}
    found |= {f"m{p['period']}": cents(p["value"]) for p in out.get("by_period", [])}
    found |= {f"g{b['group']}": cents(b["value"]) for b in out.get("breakdown", [])}
    return found


def measure(tool: str, folder: str) -> dict[str, Any]:
    """Run ``child`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", tool, folder],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:80]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-rows", type=int, default=1_000_000)
    parser.add_argument("--child", nargs=2, metavar=("TOOL", "FOLDER"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    rows_out = []
    for rows in [n for n in SIZES if n <= args.max_rows]:
        with tempfile.TemporaryDirectory(prefix="planexec-data-") as folder:
            make_csv(Path(folder) / "data.csv", rows)
            results = {tool: measure(tool, folder) for tool in TOOLS}
        reference = results["duckdb"]
        for tool in TOOLS:
            r = results[tool]
            if "error" in r:
                rows_out.append([f"{rows:,}", tool, "error", "", "", r["error"]])
                continue
            ratio = r["seconds"] / reference["seconds"] if "seconds" in reference else 0
            exact = (
                ""
                if r["totals"] is None or tool == "duckdb"
                else ("yes" if r["totals"] == reference.get("totals") else "NO")
            )
            rows_out.append(
                [
                    f"{rows:,}",
                    tool,
                    f"{r['seconds']:.2f}",
                    f"{r['rss_mb']:.0f}",
                    f"{ratio:.1f}x",
                    exact,
                ]
            )
        print(
            table(
                "data toolkit",
                ["rows", "tool", "s", "peak MB", "vs duckdb", "exact"],
                rows_out[-len(TOOLS) :],
            ),
            flush=True,
        )
    print(
        table(
            "data toolkit (all sizes)",
            ["rows", "tool", "s", "peak MB", "vs duckdb", "exact"],
            rows_out,
        )
    )


if __name__ == "__main__":
    main()
