"""Checkpoint savers as planexec opens them: SQLite (embedded) and PostgreSQL.

SQLite runs in WAL mode with ``synchronous=NORMAL``: a commit does not wait for an fsync,
which makes every finished step's durable write cheap, and the database stays intact and
complete across process crashes (SIGKILL, OOM); only a power loss or OS crash can lose the
last few commits. Pass your own saver to ``build_graph`` for other trade-offs.

PostgreSQL savers create their tables when opened. ``CREATE TABLE IF NOT EXISTS`` is not safe
in two sessions at once (both may create a table's type: "duplicate key value violates unique
constraint pg_type_typname_nsp_index"), so processes opening one database together (workers
starting side by side) take turns under the advisory lock :data:`SETUP_LOCK_KEY`. A waiting
process polls for the lock rather than blocking on it: a session blocked in
``pg_advisory_lock`` is a running transaction, which the holder's ``CREATE INDEX
CONCURRENTLY`` waits for, a deadlock PostgreSQL cannot detect.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
SETUP_LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"planexec-checkpoint-setup", digest_size=8).digest(), "big", signed=True
)
"""The PostgreSQL advisory lock a saver's table setup runs under (one setup at a time)."""
SETUP_POLL_SECONDS = 0.05
"""How often a process waiting for its turn at the setup asks for the lock again."""
TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"


def _prepare(path: str | Path) -> str:
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    return str(target)


@contextmanager
def sqlite_saver(path: str | Path) -> Iterator[SqliteSaver]:
    """Open a SQLite checkpoint file for sync use (``graph.invoke``)."""
    conn = sqlite3.connect(_prepare(path), check_same_thread=False)
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        yield SqliteSaver(conn)
    finally:
        conn.close()


@asynccontextmanager
async def async_sqlite_saver(path: str | Path) -> AsyncIterator[AsyncSqliteSaver]:
    """Open a SQLite checkpoint file for async use (``graph.ainvoke``)."""
    import aiosqlite

    conn = await aiosqlite.connect(_prepare(path))
    try:
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        yield AsyncSqliteSaver(conn)
    finally:
        await conn.close()


@contextmanager
def postgres_saver(url: str) -> Iterator[PostgresSaver]:
    """Open a PostgreSQL checkpointer for sync use, creating its tables if needed."""
    with PostgresSaver.from_conn_string(url) as saver:
        with setup_turn(url):
            saver.setup()
        yield saver


@asynccontextmanager
async def async_postgres_saver(url: str) -> AsyncIterator[AsyncPostgresSaver]:
    """Open a PostgreSQL checkpointer for async use, creating its tables if needed."""
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        async with asetup_turn(url):
            await saver.setup()
        yield saver


@contextmanager
def setup_turn(url: str) -> Iterator[None]:
    """Hold the setup lock of the PostgreSQL database ``url`` (waiting for it by polling)."""
    with psycopg.connect(url, autocommit=True) as turn:  # the lock's own session
        while not _granted(turn.execute(TRY_LOCK, (SETUP_LOCK_KEY,)).fetchone()):
            time.sleep(SETUP_POLL_SECONDS)
        yield  # the lock goes with the session when it closes


@asynccontextmanager
async def asetup_turn(url: str) -> AsyncIterator[None]:
    """Hold the setup lock of the PostgreSQL database ``url`` (async callers)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as turn:
        while not _granted(await (await turn.execute(TRY_LOCK, (SETUP_LOCK_KEY,))).fetchone()):
            await asyncio.sleep(SETUP_POLL_SECONDS)
        yield


def _granted(row: tuple[object, ...] | None) -> bool:
    """Whether ``pg_try_advisory_lock`` gave the lock."""
    return bool(row and row[0])
