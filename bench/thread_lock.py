"""Cost of the one-run-per-thread lock: taking and letting go of a thread's lock, per run.

For each saver (in-memory, SQLite via planexec.storage.persistence, PostgreSQL), sync (``hold``, as
``invoke`` does) and async (``ahold``, as ``ainvoke`` does): the median and p95 of entering and
leaving the lock of a fresh thread, 400 times, after 20 warm-up rounds (the first PostgreSQL
round opens the lock connection). Whole runs take 10-40 ms, so compare with that.
Run: python bench/thread_lock.py   (Postgres is started from Debian's server programs if installed)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import TOOLS, build_graph, table
from langgraph.checkpoint.memory import InMemorySaver

from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.storage.thread_lock import ahold, hold

ROUNDS, WARMUP = 400, 20


def config() -> Any:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def summary(samples: list[float]) -> list[str]:
    ordered = sorted(samples)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return [f"{1000 * statistics.median(ordered):.3f}", f"{1000 * p95:.3f}"]


def sync_costs(saver: Any) -> list[float]:
    graph = build_graph(checkpointer=saver, tools=TOOLS)
    samples = []
    for i in range(WARMUP + ROUNDS):
        cfg, started = config(), time.perf_counter()
        with hold(graph, cfg):
            pass
        if i >= WARMUP:
            samples.append(time.perf_counter() - started)
    return samples


async def async_costs(saver: Any) -> list[float]:
    graph = build_graph(checkpointer=saver, tools=TOOLS)
    samples = []
    for i in range(WARMUP + ROUNDS):
        cfg, started = config(), time.perf_counter()
        async with ahold(graph, cfg):
            pass
        if i >= WARMUP:
            samples.append(time.perf_counter() - started)
    return samples


async def main() -> None:
    rows: list[list[str]] = []
    with ExitStack() as stack:
        url = None
        try:
            from tests.servers import postgres

            url = stack.enter_context(postgres())
        except Exception as exc:  # the table says Postgres is missing
            print(f"(Postgres skipped: {exc})")
        async with AsyncExitStack() as astack:
            folder = Path(tempfile.mkdtemp())
            cases: list[tuple[str, Callable[[], Any], Any]] = [
                ("in-memory (process-local lock)", InMemorySaver(), InMemorySaver()),
                (
                    "SQLite (flock on a file per thread)",
                    stack.enter_context(sqlite_saver(folder / "a.db")),
                    await astack.enter_async_context(async_sqlite_saver(folder / "b.db")),
                ),
            ]
            if url:
                cases.append(
                    (
                        "PostgreSQL 15, loopback (advisory lock)",
                        stack.enter_context(postgres_saver(url)),
                        await astack.enter_async_context(async_postgres_saver(url)),
                    )
                )
            for name, sync_saver, async_saver in cases:
                rows.append(
                    [
                        name,
                        *summary(sync_costs(sync_saver)),
                        *summary(await async_costs(async_saver)),
                    ]
                )
    print(
        table(
            "Thread lock, ms per run (take + let go, fresh thread)",
            ["saver", "sync median", "sync p95", "async median", "async p95"],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
