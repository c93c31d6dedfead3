"""A sync run and an async run on one saver choose the same lock for a thread.

:func:`~planexec.storage.thread_lock.lock_for` (sync runs) and ``alock_for`` (async runs)
must name one lock for one thread, whatever the saver: if they differed, a sync run and an
async run of one thread (``graph.invoke`` in a worker thread next to ``graph.ainvoke``, the
CLI next to the server) would both go on and run every step twice. A sync call from the event
loop an async saver works on fails at once, as LangGraph's own sync calls there do, instead
of waiting forever for that loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from planexec import build_graph
from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.storage.thread_lock import FileLock, LocalLock, PgLock, alock_for, lock_for

THREAD = "thread-1"
POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def named(lock: Any) -> tuple[Any, ...]:
    """What a lock locks: its kind and its key (two equal names exclude each other)."""
    if isinstance(lock, FileLock):
        return ("file", str(lock.path), lock.thread_id)
    if isinstance(lock, PgLock):
        params = conninfo_to_dict(lock.session.conninfo)
        database = tuple(params.get(name) for name in ("host", "port", "dbname"))
        return ("postgres", database, lock.key)
    assert isinstance(lock, LocalLock), lock
    return ("local", lock.key)


async def both_ways(saver: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The lock a sync run (from a worker thread, as LangGraph's sync calls) and an async run
    choose for ``THREAD`` on ``saver``."""
    chosen_sync = await asyncio.to_thread(lock_for, saver, THREAD)
    chosen_async = await alock_for(saver, THREAD)
    return named(chosen_sync), named(chosen_async)


@asynccontextmanager
async def in_memory() -> AsyncIterator[Any]:
    yield InMemorySaver()


@asynccontextmanager
async def sqlite_file(folder: Path) -> AsyncIterator[Any]:
    with sqlite_saver(folder / "runs.sqlite") as saver:
        yield saver


@asynccontextmanager
async def sqlite_memory(folder: Path) -> AsyncIterator[Any]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@asynccontextmanager
async def aiosqlite_file(folder: Path) -> AsyncIterator[Any]:
    async with async_sqlite_saver(folder / "runs.sqlite") as saver:
        yield saver


@asynccontextmanager
async def aiosqlite_memory(folder: Path) -> AsyncIterator[Any]:
    async with aiosqlite.connect(":memory:") as conn:
        yield AsyncSqliteSaver(conn)


OFFLINE: dict[str, Callable[[Path], AbstractAsyncContextManager[Any]]] = {
    "InMemorySaver": lambda folder: in_memory(),
    "SqliteSaver file": sqlite_file,
    "SqliteSaver :memory:": sqlite_memory,
    "AsyncSqliteSaver file": aiosqlite_file,
    "AsyncSqliteSaver :memory:": aiosqlite_memory,
}
EXPECTED_KIND = {
    "InMemorySaver": "local",
    "SqliteSaver file": "file",
    "SqliteSaver :memory:": "local",
    "AsyncSqliteSaver file": "file",
    "AsyncSqliteSaver :memory:": "local",
}


@pytest.mark.parametrize("kind", list(OFFLINE))
async def test_sync_and_async_runs_choose_one_lock(kind: str, tmp_path: Path) -> None:
    async with OFFLINE[kind](tmp_path) as saver:
        chosen_sync, chosen_async = await both_ways(saver)
        assert chosen_sync == chosen_async
        assert chosen_sync[0] == EXPECTED_KIND[kind]
        again_sync, again_async = await both_ways(saver)  # a file name asked once is kept
        assert again_sync == again_async == chosen_sync


@asynccontextmanager
async def postgres_connection(url: str) -> AsyncIterator[Any]:
    with postgres_saver(url) as saver:
        yield saver


@asynccontextmanager
async def async_postgres_connection(url: str) -> AsyncIterator[Any]:
    async with async_postgres_saver(url) as saver:
        yield saver


@asynccontextmanager
async def postgres_pool(url: str, computed_kwargs: bool) -> AsyncIterator[Any]:
    kwargs: Any = (lambda: dict(POOL_KWARGS)) if computed_kwargs else dict(POOL_KWARGS)
    with ConnectionPool(url, kwargs=kwargs, min_size=1, max_size=2, open=False) as pool:
        yield PostgresSaver(pool)


@asynccontextmanager
async def async_postgres_pool(url: str, computed_kwargs: bool) -> AsyncIterator[Any]:
    kwargs: Any = (lambda: dict(POOL_KWARGS)) if computed_kwargs else dict(POOL_KWARGS)
    async with AsyncConnectionPool(url, kwargs=kwargs, min_size=1, max_size=2, open=False) as pool:
        yield AsyncPostgresSaver(pool)


POSTGRES: dict[str, Callable[[str], AbstractAsyncContextManager[Any]]] = {
    "PostgresSaver connection": postgres_connection,
    "AsyncPostgresSaver connection": async_postgres_connection,
    "PostgresSaver pool": lambda url: postgres_pool(url, computed_kwargs=False),
    "PostgresSaver pool, kwargs per connection": lambda url: postgres_pool(url, True),
    "AsyncPostgresSaver pool": lambda url: async_postgres_pool(url, computed_kwargs=False),
    "AsyncPostgresSaver pool, kwargs per connection": lambda url: async_postgres_pool(url, True),
}


@pytest.mark.parametrize("kind", list(POSTGRES))
async def test_sync_and_async_runs_choose_one_postgres_lock(kind: str, postgres_url: str) -> None:
    async with POSTGRES[kind](postgres_url) as saver:
        chosen_sync, chosen_async = await both_ways(saver)
        assert chosen_sync == chosen_async
        assert chosen_sync[0] == "postgres"
    async with postgres_connection(postgres_url) as plain:  # one database: one lock
        assert (await both_ways(plain))[0] == chosen_sync


@pytest.mark.parametrize("kind", ["AsyncSqliteSaver file", "AsyncSqliteSaver :memory:"])
def test_a_sync_run_on_its_async_savers_own_loop_fails_at_once(kind: str, tmp_path: Path) -> None:
    """``graph.invoke`` on an async saver, called on the event loop the saver works on, cannot
    wait for that loop: it fails as LangGraph's own sync calls there do (before: it hung)."""
    outcome: list[BaseException | None] = []

    async def invoke_on_the_savers_loop() -> None:
        async with OFFLINE[kind](tmp_path) as saver:
            graph = build_graph(checkpointer=saver)
            try:
                graph.invoke({"task": "t"}, {"configurable": {"thread_id": THREAD}})
            except BaseException as exc:  # the test reports what it raised
                outcome.append(exc)
            else:
                outcome.append(None)

    runner = threading.Thread(target=asyncio.run, args=(invoke_on_the_savers_loop(),))
    runner.daemon = True  # before the fix it never ends; the test must not hang with it
    runner.start()
    runner.join(timeout=20)
    assert not runner.is_alive(), "graph.invoke waited forever for the loop it runs on"
    [raised] = outcome
    assert isinstance(raised, asyncio.InvalidStateError), raised
    assert "ainvoke" in str(raised)
