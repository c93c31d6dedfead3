"""LangGraph stores on a run database, for plan memory (:mod:`planexec.memory`).

The CLI and :class:`planexec.runs.Runs` keep templates next to the checkpoints: the same SQLite
file, or the same PostgreSQL database (its tables created under the setup lock of
:mod:`planexec.storage.persistence`, like the savers'). On LangGraph Server, the platform's store is
used instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from langgraph.store.base import BaseStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from planexec.storage.persistence import asetup_turn, setup_turn


@contextmanager
def sqlite_store(path: str | Path) -> Iterator[BaseStore]:
    """Open the store in a SQLite run database for sync use, creating its tables if needed."""
    with SqliteStore.from_conn_string(str(Path(path).expanduser())) as store:
        store.setup()
        yield store


@asynccontextmanager
async def async_sqlite_store(path: str | Path) -> AsyncIterator[BaseStore]:
    """Open the store in a SQLite run database for async use."""
    async with AsyncSqliteStore.from_conn_string(str(Path(path).expanduser())) as store:
        await store.setup()
        yield store


@contextmanager
def postgres_store(url: str) -> Iterator[BaseStore]:
    """Open the store in a PostgreSQL run database for sync use."""
    with PostgresStore.from_conn_string(url) as store:
        with setup_turn(url):
            store.setup()
        yield store


@asynccontextmanager
async def async_postgres_store(url: str) -> AsyncIterator[BaseStore]:
    """Open the store in a PostgreSQL run database for async use."""
    async with AsyncPostgresStore.from_conn_string(url) as store:
        async with asetup_turn(url):
            await store.setup()
        yield store
