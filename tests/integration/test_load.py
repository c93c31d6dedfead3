"""Concurrent threads in one process: every run finishes with its own plan and results only."""

from __future__ import annotations

import asyncio
import sys

import pytest

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from load import run_load  # noqa: E402

from planexec.persistence import async_postgres_saver, async_sqlite_saver  # noqa: E402


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_fifty_concurrent_threads_finish_without_leaking(kind, tmp_path, request):
    url = request.getfixturevalue("postgres_url") if kind == "postgres" else None

    async def go():
        opener = async_postgres_saver(url) if url else async_sqlite_saver(tmp_path / "load.db")
        async with opener as saver:
            return await run_load(saver, 50)  # asserts each thread's own task and result

    rate, p50, p95 = asyncio.run(go())
    assert rate > 0 and p50 <= p95
