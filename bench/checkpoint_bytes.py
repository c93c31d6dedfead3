"""Checkpoint bytes written per run as plans grow (SQLite; checkpoints, metadata and task writes).

Run: python bench/checkpoint_bytes.py
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TOOLS, build_graph, context, random_dag, seed, table

from planexec.storage.persistence import sqlite_saver


def main() -> None:
    rows = []
    db = Path(tempfile.mkdtemp()) / "bytes.db"
    with sqlite_saver(db) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        for n in (10, 20, 40, 80, 160, 320):
            plan, _ = random_dag(n, seed=n)
            for step in plan["steps"]:
                step["args"]["seconds"] = 0
            ctx = context()
            config = seed(graph, plan, ctx)
            out = graph.invoke(None, config, context=ctx)
            assert out["final"]["status"] == "succeeded"
            tid = config["configurable"]["thread_id"]
            with sqlite3.connect(db) as conn:
                cp, meta, count = conn.execute(
                    "select sum(length(checkpoint)), sum(length(metadata)), count(*) "
                    "from checkpoints where thread_id = ?",
                    (tid,),
                ).fetchone()
                (writes,) = conn.execute(
                    "select sum(length(value)) from writes where thread_id = ?", (tid,)
                ).fetchone()
            total = cp + meta + writes
            rows.append([n, count, f"{cp:,}", f"{writes:,}", f"{total:,}", f"{total / n:,.0f}"])
    print(
        table(
            "Checkpoint bytes per run (SQLite)",
            [
                "steps",
                "checkpoints",
                "checkpoint bytes",
                "task-write bytes",
                "total bytes",
                "bytes per step",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
