"""planexec's one background event loop: sync runs' nodes and steps, model clients, MCP sessions.

One loop on a daemon thread per process (made on first use, and again in a forked child):

* **Sync runs** (``invoke``, ``stream``): each node is written once, as a coroutine; LangGraph's
  worker thread hands it to this loop and waits (:func:`run_blocking`), so a sync run does what
  an async one does, by construction. Its steps run here too.
* **Provider clients** (:mod:`planexec.llm.calls`): a client's connection pool is only ever
  used from this loop, which never closes (``asyncio.run`` under a caller would close it).
* **MCP sessions** (:mod:`planexec.tools.mcp.sessions`): opened here, kept for the process.

Code that may block never runs on it: a tool runs on a daemon worker of its own
(:mod:`planexec.concurrency.offloop`), so a hung sync tool holds only itself, and an async tool that
blocks its loop holds only its worker's loop. The loop's default executor
(``asyncio.to_thread``, ``run_in_executor``) is those daemon workers: nothing it runs keeps
the process alive at exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from planexec.concurrency.daemon_loop import DaemonLoop
from planexec.concurrency.workers import DaemonThreads

T = TypeVar("T")

_OWNED: contextvars.ContextVar[set[asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "planexec_owned_tasks", default=None
)


def _owned_task_factory(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Task[Any]:
    """Create a task; remember it for the call that owns the context it is created in."""
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
    owned = _OWNED.get()
    if owned is not None:
        owned.add(task)
    return task


_LOOP = DaemonLoop("planexec", executor=DaemonThreads, task_factory=_owned_task_factory)


def loop() -> asyncio.AbstractEventLoop:
    """Return the background loop (started on first use)."""
    return _LOOP.get()


def pid() -> int:
    """Return the process id the loop was made in (0: none made yet)."""
    return _LOOP.pid()


def on_loop() -> bool:
    """Say whether the caller runs on the background loop's thread."""
    return _LOOP.pid() != 0 and threading.current_thread() is _LOOP.thread()


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` on the background loop, in the caller's context, and wait for its result.

    For a thread that may block (LangGraph's worker thread of a sync run, a sync tool): the
    coroutine sees the caller's context variables (LangGraph's config, stream writer and
    runtime, the tracing context). Raises ``RuntimeError`` on the loop's own thread, where
    waiting would deadlock.
    """
    if on_loop():
        raise RuntimeError(
            "planexec's background loop cannot wait for itself: call the async API from a "
            "coroutine running there"
        )
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    ctx = contextvars.copy_context()
    target = loop()

    def start() -> None:
        task = target.create_task(make(), context=ctx)
        task.add_done_callback(lambda t: _copy_outcome(t, done))

    target.call_soon_threadsafe(start)
    return done.result()


def submit(work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``work`` on the background loop from any thread; return its future."""
    return asyncio.run_coroutine_threadsafe(work, loop())


def wait(work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``work`` on the background loop and wait here (a sync caller); cancel it on timeout."""
    future = submit(work)
    try:
        return future.result(timeout)
    except BaseException:
        future.cancel()
        raise


def awaitable(work: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run ``work`` on the background loop; return a future of the caller's loop for it."""
    if on_loop():
        return asyncio.ensure_future(work)
    return asyncio.wrap_future(submit(work))


def own_tasks() -> set[asyncio.Task[Any]]:
    """Start owning the tasks the current task (and those it starts) creates on this loop.

    For a call that runs on the background loop (a tool marked ``runs_on_loop``): what it
    leaves behind is cancelled when it ends (:func:`tidy`). On any other loop nothing is
    tracked and the set stays empty.
    """
    owned: set[asyncio.Task[Any]] = set()
    _OWNED.set(owned)
    return owned


def tidy(owned: set[asyncio.Task[Any]]) -> None:
    """Cancel the tasks a finished call left behind, once each, until none is left.

    A task that starts another when cancelled (a respawning heartbeat) is owned by the same
    call, so its successor is cancelled in turn. Returns at once; the tidying runs on.
    """
    if any(not task.done() for task in owned):
        owned.discard(asyncio.ensure_future(_tidy(owned)))  # made in the call's context


async def _tidy(owned: set[asyncio.Task[Any]]) -> None:
    _OWNED.set(None)  # the tidying owns nothing itself
    cancelled: set[asyncio.Task[Any]] = set()
    while left := [task for task in list(owned) if not task.done()]:
        for task in left:
            if task not in cancelled:
                cancelled.add(task)
                task.cancel()
        await asyncio.wait(left, return_when=asyncio.FIRST_COMPLETED)


def _copy_outcome(task: asyncio.Task[T], done: concurrent.futures.Future[T]) -> None:
    if task.cancelled():
        done.cancel()
    elif (exc := task.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(task.result())
