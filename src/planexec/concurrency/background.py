"""planexec's one background event loop: sync runs' nodes and steps, model clients, MCP sessions.

One loop on a daemon thread per process (made on first use, and again in a forked child, whose
thread it cannot keep); it never closes, and an exit a callback raises ends that callback, not
the loop:

* **Sync runs** (``invoke``, ``stream``): each node is written once, as a coroutine; LangGraph's
  worker thread hands it to this loop and waits (:func:`run_blocking`), so a sync run does what
  an async one does, by construction. Its steps run here too.
* **Provider clients** (:mod:`planexec.llm.calls`): a client's connection pool is only ever
  used from this loop, which never closes (``asyncio.run`` under a caller would close it).
* **MCP sessions** (:mod:`planexec.tools.mcp.sessions`): opened here, kept for the process.

Code that may block never runs on it: a tool runs on a daemon worker of its own
(:mod:`planexec.concurrency.offloop`), so a hung sync tool holds only itself, and an async tool
that blocks its loop holds only its worker's loop. The loop's default executor
(``asyncio.to_thread``, ``run_in_executor``) is those daemon workers: nothing it runs keeps
the process alive at exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

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
    given = kwargs.get("context")
    owned = given.get(_OWNED) if given is not None else _OWNED.get()
    if owned is not None:
        owned.add(task)
    return task


class _Loop:
    """The loop and its daemon thread, made on first use and again in a forked child."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        loop, thread = self.loop, self.thread
        if (
            loop is not None
            and thread is not None
            and thread.is_alive()
            and self.pid == os.getpid()
        ):
            return loop  # the common case: no lock
        with self.lock:  # none yet, or a forked child (a loop's thread does not survive a fork)
            if self.thread is None or not self.thread.is_alive() or self.pid != os.getpid():
                loop = asyncio.new_event_loop()
                loop.set_default_executor(DaemonThreads())
                loop.set_task_factory(_owned_task_factory)  # type: ignore[arg-type]
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve, args=(loop, ready), name="planexec", daemon=True
                )
                thread.start()
                ready.wait()
                self.loop, self.thread, self.pid = loop, thread, os.getpid()
            assert self.loop is not None
            return self.loop


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    while True:  # an exit raised by a callback ends that callback, never the loop
        try:
            loop.run_forever()
        except BaseException:  # its caller was told through its future
            continue


_LOOP = _Loop()


def loop() -> asyncio.AbstractEventLoop:
    """Return the background loop (started on first use)."""
    return _LOOP.get()


def pid() -> int:
    """Return the process id the loop was made in (0: none made yet)."""
    return _LOOP.pid


def on_loop() -> bool:
    """Say whether the caller runs on the background loop's thread."""
    return _LOOP.pid == os.getpid() and threading.current_thread() is _LOOP.thread


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` on the background loop, in the caller's context, and wait for its result.

    For a thread that may block (LangGraph's worker thread of a sync run, a sync tool): the
    coroutine sees the caller's context variables (LangGraph's config, stream writer and
    runtime, the tracing context). Raises ``RuntimeError`` on the loop's own thread, where
    waiting would deadlock.
    """
    _refuse_on_loop()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    ctx = contextvars.copy_context()
    target = loop()
    started: list[asyncio.Task[T]] = []
    scope = _SCOPE.get()

    def start() -> None:
        if done.cancelled():  # the caller stopped before it started
            return
        task = target.create_task(make(), context=ctx)
        started.append(task)
        task.add_done_callback(lambda t: _copy_outcome(t, done))
        if scope is not None:
            scope.add(task)

    target.call_soon_threadsafe(start)
    try:
        return done.result()
    except BaseException:  # the caller stopped (Ctrl-C, a closed stream): so does the work
        if not done.done():
            done.cancel()
            target.call_soon_threadsafe(lambda: [task.cancel() for task in started])
            _ended(started, CANCEL_WAIT)
        raise


class RunScope:
    """The work a sync run has on the background loop (its nodes' and steps' coroutines).

    Stopping it cancels all of it, and whatever the run starts there afterwards, at once: a
    sync run is stopped by its caller's thread (Ctrl-C, a closed stream), where LangGraph then
    waits for its worker threads, which wait on this work.
    """

    def __init__(self) -> None:
        """Start with no work, not stopped."""
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopped = False

    def add(self, task: asyncio.Task[Any]) -> None:
        """Count a task of the run (called on the loop); cancel it if the run has stopped."""
        with self._lock:
            if not self.stopped:
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
        task.cancel()

    def stop(self) -> None:
        """Cancel the run's work on the loop, and any it starts later (from any thread)."""
        with self._lock:
            self.stopped = True
            tasks = list(self._tasks)
        if tasks:
            with contextlib.suppress(RuntimeError):  # the loop has gone: nothing runs there
                loop().call_soon_threadsafe(lambda: [task.cancel() for task in tasks])


_SCOPE: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar(
    "planexec_run_scope", default=None
)


def run_context(scope: RunScope) -> contextvars.Context:
    """Return a context of its own for a sync run, in which ``scope`` collects its work.

    The run's generator is advanced and closed in it (``ctx.run(next, parts)``), so the scope
    belongs to the run, never to whoever reads its stream (a server may read each part in
    another context), and the reader's own context is never changed.
    """
    ctx = contextvars.copy_context()
    ctx.run(_SCOPE.set, scope)
    return ctx


# Ctrl-C. A sync run read in the main thread is stopped when Ctrl-C interrupts it: LangGraph
# waits for its worker threads as the interrupt unwinds, and they wait on the run's work here.
# One process-wide handler wraps whatever handler was there: when that handler raises (Python's
# own raises KeyboardInterrupt; so may yours), the live runs' work is stopped first. A handler
# that does not raise (it sets a flag, asyncio's) stops nothing. Restored when the last run
# ends, unless someone installed another meanwhile.
_SIGINT_LOCK = threading.Lock()
_WATCHED: set[RunScope] = set()
_PREVIOUS: Any = None


def _on_sigint(signum: int, frame: Any) -> None:
    # installed again by someone who saved it (signal.signal returns it): Python's own then
    previous = _PREVIOUS if callable(_PREVIOUS) else signal.default_int_handler
    try:
        previous(signum, frame)
    except BaseException:
        for scope in list(_WATCHED):
            scope.stop()
        raise


def watch_sigint(scope: RunScope) -> bool:
    """Stop ``scope`` when Ctrl-C interrupts this (main) thread; False if it cannot be watched.

    Only in the main thread (where signals arrive), and only over a Python handler (not
    ``SIG_IGN`` or ``SIG_DFL``).
    """
    global _PREVIOUS
    if threading.current_thread() is not threading.main_thread():
        return False
    with _SIGINT_LOCK:
        current = signal.getsignal(signal.SIGINT)
        if current is not _on_sigint:  # none yet, or one installed since (then it is wrapped)
            if not callable(current):
                return False
            _PREVIOUS = current
            signal.signal(signal.SIGINT, _on_sigint)
        _WATCHED.add(scope)
    return True


def unwatch_sigint(scope: RunScope) -> None:
    """Stop watching ``scope``; after the last one, give SIGINT back to its handler.

    Given back only from the main thread, and only if the handler is still planexec's (one
    installed meanwhile is kept). Left installed otherwise: with no run watched it only calls
    the handler it wraps.
    """
    global _PREVIOUS
    with _SIGINT_LOCK:
        _WATCHED.discard(scope)
        if _WATCHED or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is _on_sigint and _PREVIOUS is not None:
            signal.signal(signal.SIGINT, _PREVIOUS)
            _PREVIOUS = None


CANCEL_WAIT = 5.0
"""Seconds a stopped caller waits for its work to end once cancelled (it ends at once unless
it swallows the cancellation)."""


def _ended(started: list[asyncio.Task[Any]], timeout: float) -> None:
    """Wait (on the caller's thread) until the started task has ended, at most ``timeout``."""
    ended = threading.Event()

    def watch() -> None:  # on the loop, after the cancellation (callbacks run in order)
        if not started or started[0].done():
            ended.set()
        else:
            started[0].add_done_callback(lambda _: ended.set())

    loop().call_soon_threadsafe(watch)
    ended.wait(timeout)


def _refuse_on_loop() -> None:
    if on_loop():
        raise RuntimeError(
            "planexec's background loop cannot wait for itself: call the async API from a "
            "coroutine running there (a tool marked runs_on_loop runs there on sync runs)"
        )


def submit(work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``work`` on the background loop from any thread; return its future."""
    return asyncio.run_coroutine_threadsafe(work, loop())


def wait(work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``work`` on the background loop and wait here (a sync caller); cancel it on timeout."""
    if on_loop():
        work.close()  # never started
        _refuse_on_loop()
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


def unowned(work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``work`` as a task of the running loop that no call owns (it outlives its starter).

    For what lives as long as the process (an MCP session): a tool call that happens to open
    it must not have it cancelled when the call ends (:func:`tidy`).
    """
    return asyncio.get_running_loop().create_task(work, context=contextvars.Context())


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
