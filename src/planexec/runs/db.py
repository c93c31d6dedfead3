"""Open a run database: a SQLite file path or a ``postgresql://`` URL, for sync or async use."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any, NoReturn

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from planexec.errors import PlanexecError
from planexec.redaction.secrets import mask_urls, register_url_secrets
from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.storage.stores import (
    async_postgres_store,
    async_sqlite_store,
    postgres_store,
    sqlite_store,
)

OPEN_ERRORS = (ImportError, OSError, sqlite3.Error, psycopg.Error)


class RunError(PlanexecError):
    """A request the runs API cannot carry out (unknown thread, bad plan file, ...): one line."""


def default_db() -> str:
    """Return where runs are kept by default: ``$PLANEXEC_DB``, else the user data dir."""
    if os.environ.get("PLANEXEC_DB"):
        return os.environ["PLANEXEC_DB"]
    from platformdirs import user_data_path

    return str(user_data_path("planexec") / "runs.sqlite")


def redact(db: str) -> str:
    """Hide the passwords of a database URL (``postgresql://user:***@host/db``)."""
    return mask_urls(db)


POSTGRES_URL = re.compile(r"(?i)^\s*postgres(?:ql)?(?:\+\w+)?://")
LIBPQ_KEYWORDS = re.compile(r"(?:^|\s)(?:host|hostaddr|dbname|user|password|port|service)\s*=")


def is_postgres(db: str) -> bool:
    """Say whether ``db`` names a PostgreSQL database (a URL of any spelling, or libpq keywords)."""
    return bool(POSTGRES_URL.match(db) or LIBPQ_KEYWORDS.search(db))


def postgres_conninfo(db: str) -> str:
    """Return ``db`` as psycopg takes it: ``postgresql://`` (no driver suffix), or keywords."""
    match = POSTGRES_URL.match(db)
    return "postgresql://" + db[match.end() :] if match else db.strip()


def _cannot_open(db: str, exc: BaseException) -> NoReturn:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    raise RunError(f"cannot open the run database {redact(db)}: {reason}") from None


@contextmanager
def open_saver(db: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open a LangGraph checkpointer on ``db`` for sync use (``graph.invoke``).

    Example::

        with open_saver("runs.sqlite") as saver:
            graph = planexec.build_graph(checkpointer=saver)
    """
    register_url_secrets(db)  # scrubbed from everything printed, whatever quotes it
    with ExitStack() as stack:
        try:
            opened = postgres_saver(postgres_conninfo(db)) if is_postgres(db) else sqlite_saver(db)
            saver: BaseCheckpointSaver[Any] = stack.enter_context(opened)
        except OPEN_ERRORS as exc:
            _cannot_open(db, exc)
        yield saver


@asynccontextmanager
async def aopen_saver(db: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open a LangGraph checkpointer on ``db`` for async use (``graph.ainvoke``).

    Example::

        async with aopen_saver("postgresql://user:pw@host/db") as saver:
            graph = planexec.build_graph(checkpointer=saver)
    """
    register_url_secrets(db)
    async with AsyncExitStack() as stack:
        try:
            if is_postgres(db):
                saver: BaseCheckpointSaver[Any] = await stack.enter_async_context(
                    async_postgres_saver(postgres_conninfo(db))
                )
            else:
                saver = await stack.enter_async_context(async_sqlite_saver(db))
        except OPEN_ERRORS as exc:
            _cannot_open(db, exc)
        yield saver


@contextmanager
def open_store(db: str) -> Iterator[BaseStore]:
    """Open the LangGraph store in ``db`` (plan memory's templates) for sync use."""
    try:
        with (
            postgres_store(postgres_conninfo(db)) if is_postgres(db) else sqlite_store(db)
        ) as store:
            yield store
    except OPEN_ERRORS as exc:
        _cannot_open(db, exc)


@asynccontextmanager
async def aopen_store(db: str) -> AsyncIterator[BaseStore]:
    """Open the LangGraph store in ``db`` (plan memory's templates) for async use."""
    async with AsyncExitStack() as stack:
        try:
            opened = (
                async_postgres_store(postgres_conninfo(db))
                if is_postgres(db)
                else async_sqlite_store(db)
            )
            store = await stack.enter_async_context(opened)
        except OPEN_ERRORS as exc:
            _cannot_open(db, exc)
        yield store
