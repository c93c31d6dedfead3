"""One run per thread at a time, across threads and processes.

Two runs on one thread (two resumes of one approval, say) would each run the pending steps,
so every side effect would happen twice. :class:`planexec.admission.PlanexecGraph` holds the
thread's lock around a whole run (and a state edit) with :func:`hold` or :func:`ahold`; a run
that finds the thread held fails at once with :class:`ThreadBusyError`, before anything is
read or written. The lock is chosen by the checkpoint saver the run uses:

- **PostgreSQL** (``PostgresSaver``, ``AsyncPostgresSaver``, any saver whose ``conn`` is a
  psycopg connection or pool): a session-level ``pg_try_advisory_lock`` keyed by a hash of the
  thread id, taken on one connection per process and database opened for locks only. The
  server drops the locks with the session when the holding process dies.
- **SQLite** (``SqliteSaver``, ``AsyncSqliteSaver``): ``flock`` on a per-thread file in
  ``<database>-planexec-locks/``; the kernel drops it when the holding process dies.
- **Anything else** (``InMemorySaver``, a SQLite ``:memory:`` database, other savers): a lock
  local to this process, which is all such a saver can share.

Runs nested in another run (a subgraph, or a graph called from a node or a tool: LangGraph
gives them a task id and a checkpoint namespace of their own) run under their parent's hold
and take no lock; reading state (``get_state``) never takes one.

Sync and async runs choose the lock in one place (:func:`choose`). A sync run on an async
saver asks the saver's event loop; made on that loop's own thread, it fails at once with
:class:`asyncio.InvalidStateError`, as LangGraph's own sync calls there do.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Hashable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from langgraph.checkpoint.base import BaseCheckpointSaver
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from planexec.compat.langgraph import checkpointer_of, parent_task_id
from planexec.errors import PlanexecError

log = logging.getLogger(__name__)

LOCK_DIR_SUFFIX = "-planexec-locks"
# Session settings of the lock connection: never closed for being idle, and dropped by the
# server (with its locks) about a minute after the holder's machine stops answering.
PG_SESSION_SETTINGS = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}
PG_IDLE_SESSION_TIMEOUT_SINCE = 140000  # PostgreSQL 14 added idle_session_timeout


class ThreadBusyError(PlanexecError, ValueError):
    """Another run is using the thread right now; this one did nothing and stored nothing."""


def busy(thread_id: str) -> ThreadBusyError:
    """Build the error for a run that found ``thread_id`` held by another run."""
    return ThreadBusyError(
        f"thread {thread_id} is busy: another run is using it right now (in this process or "
        f"another); nothing was run or changed, try again when that run has finished"
    )


def advisory_key(thread_id: str) -> int:
    """Return the PostgreSQL advisory lock key of a thread: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(
        f"planexec-thread:{thread_id}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class Lock:
    """A thread's lock of one kind: taken without waiting, or refused; held with ``with``.

    ``with lock:`` (a sync run) and ``async with lock:`` (an async run) take and let go of it
    the same way; an async run does a lock's blocking I/O (:attr:`blocking`: files, sockets)
    in a worker thread, and a run cancelled while it takes or lets go of the lock still ends
    with the lock let go.
    """

    blocking = True
    """Whether taking or letting go does blocking I/O, which must stay off an event loop."""

    def acquire(self) -> None:
        """Take the lock now, or raise :class:`ThreadBusyError`."""
        raise NotImplementedError

    def release(self) -> None:
        """Let go of the lock (never raises for a lock that is already gone)."""
        raise NotImplementedError

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    async def __aenter__(self) -> None:
        if self.blocking:
            await _finish_in_thread(self.acquire, undo=self.release)
        else:
            self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        if self.blocking:
            await _finish_in_thread(self.release)
        else:
            self.release()


# -- process-local ------------------------------------------------------------------------

_LOCAL_HELD: set[tuple[Hashable, str]] = set()
_LOCAL_MUTEX = threading.Lock()


class LocalLock(Lock):
    """A lock on ``(scope, thread)`` for the threads and tasks of this process."""

    blocking = False

    def __init__(self, scope: Hashable, thread_id: str) -> None:
        """``scope`` names the store the thread lives in (e.g. the saver's identity)."""
        self.key = (scope, thread_id)
        self.thread_id = thread_id

    def acquire(self) -> None:
        """Take the lock, or raise :class:`ThreadBusyError` if this process holds it."""
        with _LOCAL_MUTEX:
            if self.key in _LOCAL_HELD:
                raise busy(self.thread_id)
            _LOCAL_HELD.add(self.key)

    def release(self) -> None:
        """Let go of the lock."""
        with _LOCAL_MUTEX:
            _LOCAL_HELD.discard(self.key)


# -- SQLite: flock on a file per thread ----------------------------------------------------


class FileLock(Lock):
    """``flock`` on ``<database>-planexec-locks/<hash of the thread id>.lock``.

    The file is removed by its holder before it lets go; a run that locked a file which was
    removed meanwhile starts over with the new one, so two runs never hold different files of
    one thread.
    """

    def __init__(self, database: str, thread_id: str) -> None:
        """Lock ``thread_id`` of the SQLite file ``database`` (an absolute path)."""
        name = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        self.path = Path(os.path.realpath(database) + LOCK_DIR_SUFFIX) / f"{name}.lock"
        self.thread_id = thread_id
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`ThreadBusyError` if any process holds it."""
        self.path.parent.mkdir(exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise busy(self.thread_id) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                self.fd = fd
                return
            os.close(fd)  # its holder removed this file as it let go: lock the new one

    def release(self) -> None:
        """Remove the file, then let go of it."""
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


def sqlite_file(conn: sqlite3.Connection) -> str:
    """Return the file of a SQLite connection's main database ('' for an in-memory one)."""
    return main_file(conn.execute(DATABASE_LIST).fetchall())


async def aiosqlite_file(conn: Any) -> str:
    """Return the file of an aiosqlite connection's main database, asking its thread once."""
    file = _AIOSQLITE_FILES.get(conn)
    if file is None:  # a connection's file never changes
        cursor = await conn.execute(DATABASE_LIST)
        file = _AIOSQLITE_FILES[conn] = main_file(await cursor.fetchall())
    return file


DATABASE_LIST = "PRAGMA database_list"


def main_file(rows: Any) -> str:
    """Return the file of the main database from ``PRAGMA database_list`` rows ('' if none)."""
    return next((str(row[2] or "") for row in rows if row[1] == "main"), "")


_AIOSQLITE_FILES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


# -- PostgreSQL: advisory locks on one lock connection per process and database ------------


class PgLockSession:
    """A connection of this process for thread locks on one database, and the locks it holds.

    Session advisory locks are re-entrant within a session, so the session also remembers
    which threads it holds and refuses a second run of this process on one of them.
    """

    def __init__(self, conninfo: str) -> None:
        """Connect (lazily) with ``conninfo``."""
        self.conninfo = conninfo
        self.mutex = threading.Lock()
        self.conn: psycopg.Connection[Any] | None = None
        self.held: set[int] = set()

    def try_lock(self, key: int) -> bool:
        """Take the advisory lock ``key`` unless anyone (this process included) holds it."""
        with self.mutex:
            if key in self.held:
                return False
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    break
                except psycopg.OperationalError:
                    self._drop()
                    if attempt == 2:
                        raise
            if row and row[0]:
                self.held.add(key)
                return True
            return False

    def unlock(self, key: int) -> None:
        """Let go of the advisory lock ``key`` (gone anyway if the connection broke)."""
        with self.mutex:
            self.held.discard(key)
            if self.conn is None:
                return
            try:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._drop()

    def _connection(self) -> psycopg.Connection[Any]:
        if self.conn is not None and not self.conn.closed:
            return self.conn
        conn = psycopg.connect(self.conninfo, autocommit=True)
        for name, value in PG_SESSION_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        if conn.info.server_version >= PG_IDLE_SESSION_TIMEOUT_SINCE:
            conn.execute("SELECT set_config('idle_session_timeout', '0', false)")
        for key in sorted(self.held):  # the old session's locks went with it: take them again
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (row and row[0]):
                log.warning("a running thread's lock was lost with its connection (key %s)", key)
        self.conn = conn
        return conn

    def _drop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
        self.conn = None


_PG_SESSIONS: dict[tuple[int, str], PgLockSession] = {}
_PG_SESSIONS_MUTEX = threading.Lock()


def pg_session(conninfo: str) -> PgLockSession:
    """Return the lock session of this process for the database ``conninfo`` names."""
    params = {k: v for k, v in conninfo_to_dict(conninfo).items() if k != "password"}
    key = (os.getpid(), make_conninfo("", **params))  # a forked child makes its own connection
    with _PG_SESSIONS_MUTEX:
        session = _PG_SESSIONS.get(key)
        if session is None:
            session = _PG_SESSIONS[key] = PgLockSession(conninfo)
        session.conninfo = conninfo  # the newest credentials, for a reconnection
        return session


class PgLock(Lock):
    """A session-level advisory lock on a thread, on this process's lock connection."""

    def __init__(self, conninfo: str, thread_id: str) -> None:
        """Lock ``thread_id`` in the database ``conninfo`` names."""
        self.session = pg_session(conninfo)
        self.key = advisory_key(thread_id)
        self.thread_id = thread_id
        self.held = False

    def acquire(self) -> None:
        """Take the lock, or raise :class:`ThreadBusyError` if any process holds it."""
        if not self.session.try_lock(self.key):
            raise busy(self.thread_id)
        self.held = True

    def release(self) -> None:
        """Let go of the lock."""
        if self.held:
            self.held = False
            self.session.unlock(self.key)


# Arguments of psycopg.connect that are not connection parameters (a pool's kwargs may hold them).
PSYCOPG_CONNECT_ARGS = frozenset(
    {"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"}
)


def conninfo_of(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """Return the connection string of an open connection, password included."""
    password = conn.info.password
    return make_conninfo(conn.info.dsn, **({"password": password} if password else {}))


def pool_conninfo(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> str | None:
    """Return a pool's connection string when it is fixed (None if computed per connection)."""
    if callable(pool.conninfo) or callable(pool.kwargs):
        return None
    extra = {k: v for k, v in (pool.kwargs or {}).items() if k not in PSYCOPG_CONNECT_ARGS}
    return make_conninfo(pool.conninfo or "", **extra)


# -- choosing the lock ----------------------------------------------------------------------


def target(
    graph: Any, config: RunnableConfig | None
) -> tuple[BaseCheckpointSaver[Any], str] | None:
    """Return the saver and thread id a run of ``graph`` writes to, if it needs a lock.

    None when there is no saver or no thread id, or when the run is nested in another run
    (called from a task of a running graph, in a checkpoint namespace of its own): the
    outermost run holds the thread. A namespace alone is not nesting: LangGraph runs a root
    graph given one on the thread's own state.
    """
    merged = ensure_config(merge_configs(graph.config, config))
    conf = merged.get("configurable") or {}
    if conf.get("checkpoint_ns") and parent_task_id(merged):
        return None
    saver = checkpointer_of(merged)
    if saver is None and graph.checkpointer is not False:
        saver = graph.checkpointer
    thread_id = conf.get("thread_id")
    if not isinstance(saver, BaseCheckpointSaver) or thread_id is None:
        return None
    return saver, str(thread_id)


Locks = Callable[[str], Lock]
"""The locks of one store: the lock of a thread, given its id."""


def sqlite_locks(file: str, scope: Hashable) -> Locks:
    """Return the locks of a SQLite database: a file per thread; in memory, this process's."""
    return partial(FileLock, file) if file else partial(LocalLock, scope)


@dataclass(frozen=True)
class BlockingAsk:
    """The blocking question a choice needs: a sync run asks it, an async one in a thread."""

    ask: Callable[[], Locks]

    def answer(self) -> Locks:
        """Ask, blocking."""
        return self.ask()

    async def aanswer(self) -> Locks:
        """Ask in a worker thread."""
        return await asyncio.to_thread(self.ask)


@dataclass(frozen=True)
class LoopAsk:
    """The question a choice needs that the saver's event loop asks (an async connection's).

    An async run awaits it; a sync run (LangGraph makes sync calls on an async saver from
    another thread) waits for the saver's ``loop`` to answer it.
    """

    ask: Callable[[], Coroutine[Any, Any, Locks]]
    loop: asyncio.AbstractEventLoop | None
    scope: Hashable

    def answer(self) -> Locks:
        """Wait for the saver's loop to answer (this process's locks if it has no loop).

        Raises :class:`asyncio.InvalidStateError` on that loop's own thread, which cannot
        wait for itself (LangGraph's sync calls on an async saver refuse it the same way).
        """
        if self.loop is None:
            return partial(LocalLock, self.scope)
        if _running_loop() is self.loop:
            raise asyncio.InvalidStateError(ON_THE_SAVERS_LOOP)
        return asyncio.run_coroutine_threadsafe(self.ask(), self.loop).result()

    async def aanswer(self) -> Locks:
        """Ask, awaiting the answer."""
        return await self.ask()


ON_THE_SAVERS_LOOP = (
    "a sync run cannot use an async checkpointer on the event loop the checkpointer works on "
    "(it would wait for itself): use `await graph.ainvoke(...)` / `astream`, or make the "
    "sync call from another thread"
)


def choose(saver: BaseCheckpointSaver[Any]) -> Locks | BlockingAsk | LoopAsk:
    """Return the locks of the saver's store, or the one question to ask to know them.

    The choice for sync and async runs alike: :func:`lock_for` and :func:`alock_for` only
    ask the question (a SQLite file's name, a pool connection's conninfo) their own way.
    """
    conn: Any = getattr(saver, "conn", None)
    scope = store_identity(saver)
    loop = getattr(saver, "loop", None)
    saver_loop = loop if isinstance(loop, asyncio.AbstractEventLoop) else None
    if isinstance(conn, sqlite3.Connection):
        return BlockingAsk(lambda: sqlite_locks(_sqlite_file_of(saver, conn), scope))
    if _is_aiosqlite(conn):

        async def aiosqlite_locks() -> Locks:
            return sqlite_locks(await aiosqlite_file(conn), scope)

        return LoopAsk(aiosqlite_locks, saver_loop, scope)
    if isinstance(conn, psycopg.Connection | psycopg.AsyncConnection):
        return partial(PgLock, conninfo_of(conn))
    if isinstance(conn, ConnectionPool | AsyncConnectionPool):
        info = pool_conninfo(conn)
        if info is not None:
            return partial(PgLock, info)
        if isinstance(conn, ConnectionPool):
            return BlockingAsk(lambda: partial(PgLock, _borrowed_conninfo(conn)))

        async def borrowed_locks() -> Locks:
            async with conn.connection() as borrowed:
                return partial(PgLock, conninfo_of(borrowed))

        return LoopAsk(borrowed_locks, saver_loop, scope)
    return partial(LocalLock, scope)


def lock_for(saver: BaseCheckpointSaver[Any], thread_id: str) -> Lock:
    """Return the lock of ``thread_id`` in the saver's store, for a sync run (may block)."""
    chosen = choose(saver)
    locks = chosen.answer() if isinstance(chosen, BlockingAsk | LoopAsk) else chosen
    return locks(thread_id)


async def alock_for(saver: BaseCheckpointSaver[Any], thread_id: str) -> Lock:
    """Return the lock of ``thread_id`` in the saver's store, for an async run."""
    chosen = choose(saver)
    locks = await chosen.aanswer() if isinstance(chosen, BlockingAsk | LoopAsk) else chosen
    return locks(thread_id)


def store_identity(saver: BaseCheckpointSaver[Any]) -> tuple[str, int]:
    """Name the store a saver writes to, within this process.

    LangGraph hands runs shallow copies of a saver (with their own serializer settings), so
    the saver object itself does not name the store: its connection or storage does.
    """
    for attribute in ("conn", "storage"):
        value = getattr(saver, attribute, None)
        if value is not None:
            return attribute, id(value)
    return "saver", id(saver)


def _sqlite_file_of(saver: BaseCheckpointSaver[Any], conn: sqlite3.Connection) -> str:
    with getattr(saver, "lock", None) or contextlib.nullcontext():  # SqliteSaver's own mutex
        return sqlite_file(conn)


def _borrowed_conninfo(pool: ConnectionPool[Any]) -> str:
    with pool.connection() as borrowed:
        return conninfo_of(borrowed)


def _is_aiosqlite(conn: Any) -> bool:
    return type(conn).__module__.startswith("aiosqlite")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# -- holding a thread ----------------------------------------------------------------------


@contextmanager
def hold(graph: Any, config: RunnableConfig | None) -> Iterator[None]:
    """Hold the thread a sync run of ``graph`` with ``config`` writes to, while the block runs.

    Raises :class:`ThreadBusyError` at once if another run holds it.
    """
    found = target(graph, config)
    with lock_for(*found) if found is not None else contextlib.nullcontext():
        yield


@asynccontextmanager
async def ahold(graph: Any, config: RunnableConfig | None) -> AsyncIterator[None]:
    """Hold the thread an async run writes to, as :func:`hold` (blocking I/O in a thread).

    A run cancelled while it takes or lets go of the lock still ends with the lock released.
    """
    found = target(graph, config)
    async with await alock_for(*found) if found is not None else contextlib.nullcontext():
        yield


async def _finish_in_thread(
    work: Callable[[], None], undo: Callable[[], None] | None = None
) -> None:
    """Run ``work`` in a worker thread to its end even if the caller is cancelled meanwhile.

    If the caller is cancelled and ``work`` succeeds, ``undo`` runs afterwards (a lock taken
    for a run that will not happen is let go).
    """
    future = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        if undo is not None:

            def undo_if_done(done: asyncio.Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    threading.Thread(target=undo, daemon=True).start()

            future.add_done_callback(undo_if_done)
        raise
