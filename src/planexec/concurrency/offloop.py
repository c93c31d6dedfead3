"""One call off the event loop, on a daemon worker thread of its own, awaited as a plain future.

A sync function runs on the worker's thread; an async one on the worker's own event loop
(:mod:`planexec.concurrency.workers`). So a call that blocks (``time.sleep``, a CPU loop, a blocking
driver) stalls only itself, never the loop that awaits it. The caller awaits a plain future,
so cancelling the caller (a timeout) returns at once even if the call swallows
``CancelledError`` or never yields; the call is then asked to stop and, if it goes on, counted
as abandoned (:mod:`planexec.concurrency.abandoned`) until it ends. :class:`OnLoopCall` runs a
coroutine on the caller's own loop instead (for tools that vouch they never block), awaited the
same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from planexec.concurrency import abandoned, background, workers
from planexec.concurrency.abandoned import AbandonedCall, CallScope
from planexec.errors import ToolError

CANCEL_GRACE = 0.1
"""Seconds a cancelled call may take to stop before it is counted as abandoned."""

Make = Callable[[], Coroutine[Any, Any, Any]]


# Not anyio.to_thread.run_sync(abandon_on_cancel=True): its threads are not daemons (a hung tool
# would keep the process alive), share a limit of 40 per loop, and run no event loop of their own.
class OffLoopCall:
    """One call on a worker thread of its own; an async function runs on the worker's loop."""

    def __init__(self, name: str, scope: CallScope | None, *, counted: bool = True) -> None:
        """Name the call; a ``counted`` call is counted as abandoned if it outlives its caller."""
        self.name = name
        self.scope = scope
        self.counted = counted
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._finished = self._abandoned = self._cancel_requested = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    async def run(self, sync_fn: Callable[[], Any] | None, make: Make | None) -> Any:
        """Run ``sync_fn()`` or ``await make()`` on a worker; cancelling this abandons the call."""
        result, ended = self._start(sync_fn, make)
        try:
            return await result
        except asyncio.CancelledError:
            self._cancel()
            try:
                if make is not None:  # an async call may stop when cancelled; a thread cannot
                    await asyncio.wait({ended}, timeout=CANCEL_GRACE)
            finally:
                self._abandon()
            raise

    def _start(
        self, sync_fn: Callable[[], Any] | None, make: Make | None
    ) -> tuple[asyncio.Future[Any], asyncio.Future[None]]:
        """Hand the call to a worker; return (its result, its end) as futures of this loop."""
        caller = asyncio.get_running_loop()
        result: asyncio.Future[Any] = caller.create_future()
        ended: asyncio.Future[None] = caller.create_future()
        ctx = contextvars.copy_context()

        def settle(value: Any, exc: BaseException | None) -> None:
            # one hand-off settles both futures (each wakes the caller's loop); the caller's
            # loop may be closed by now (an abandoned call): then drop the outcome
            with contextlib.suppress(RuntimeError):
                caller.call_soon_threadsafe(_settle_both, result, ended, value, exc)

        def job(worker: workers.Worker) -> None:
            value: Any = None
            error: BaseException | None = None
            try:
                if make is not None:
                    value = worker.run_coroutine(self._body(make), ctx)
                elif sync_fn is not None:
                    value = ctx.run(sync_fn)
                else:
                    raise TypeError("an off-loop call needs a function or a coroutine maker")
            except BaseException as exc:  # handed to the awaiting coroutine
                error = exc
            finally:
                self._finish()
                settle(value, error)

        workers.lease().submit(job)
        return result, ended

    async def _body(self, make: Make) -> Any:
        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            if self._cancel_requested:
                raise asyncio.CancelledError
        try:
            return await make()
        finally:
            with self._lock:
                self._loop = None

    def _cancel(self) -> None:
        """Ask the call to stop: cancel an async call on its loop (a thread cannot be stopped)."""
        with self._lock:
            self._cancel_requested = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed: it has ended
                loop.call_soon_threadsafe(task.cancel)

    def _abandon(self) -> None:
        """Count the call as abandoned unless it has ended."""
        with self._lock:
            if self._finished or not self.counted:
                return
            self._abandoned = True
            scope = self.scope
            abandoned.add(
                id(self),
                AbandonedCall(
                    tool=self.name,
                    thread_id=scope.thread_id if scope else None,
                    step=scope.step if scope else None,
                    started_at=self.started_at,
                    abandoned_at=time.time(),
                ),
            )

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            if self._abandoned:
                abandoned.remove(id(self))


class OnLoopCall(OffLoopCall):
    """One async call on the caller's own loop, in a task of its own, awaited as an off-loop call.

    No thread hop: the call may block the loop (its author vouches it does not). On planexec's
    background loop (sync runs) the tasks it leaves behind are cancelled when it ends
    (:func:`planexec.concurrency.background.tidy`). Its task is awaited through a plain future, so
    a timeout still returns after at most :data:`CANCEL_GRACE` even if the call swallows
    ``CancelledError``, and a call that goes on is counted as abandoned until it ends; what it
    raises is reported as from a worker.
    """

    def _start(
        self, sync_fn: Callable[[], Any] | None, make: Make | None
    ) -> tuple[asyncio.Future[Any], asyncio.Future[None]]:
        """Start the call as a task of the caller's loop; return (its result, its end)."""
        if make is None:
            raise TypeError("only a coroutine can run on the caller's loop")
        loop = asyncio.get_running_loop()
        result: asyncio.Future[Any] = loop.create_future()
        ended: asyncio.Future[None] = loop.create_future()

        async def job() -> None:
            value: Any = None
            error: BaseException | None = None
            owned = background.own_tasks()  # what the call leaves on the loop is cancelled
            try:
                value = await self._body(make)
            except BaseException as exc:  # handed to the awaiting coroutine, as from a worker
                error = exc
            finally:
                self._finish()
                _settle_both(result, ended, value, error)
                background.tidy(owned)

        self._job = loop.create_task(job())  # held: the loop keeps only weak references
        return result, ended


def _settle_both(
    result: asyncio.Future[Any],
    ended: asyncio.Future[None],
    value: Any,
    exc: BaseException | None,
) -> None:
    _settle(result, value, exc)
    _settle(ended, None, None)


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the caller gave up: the outcome is dropped
        return
    if exc is not None and (not isinstance(exc, Exception) or isinstance(exc, StopIteration)):
        # raised by the call itself (CancelledError, SystemExit, ...): not the caller's
        # cancellation nor the process's exit, and futures refuse StopIteration
        fut.set_exception(ToolError(f"the tool raised {type(exc).__name__}"))
    elif exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


async def run_in_thread(fn: Callable[[], Any], name: str = "call") -> Any:
    """Run a blocking function in a daemon thread and await it; cancelling abandons the thread.

    For planexec's own blocking work (files, model construction): not counted or bounded.
    """
    return await OffLoopCall(name, None, counted=False).run(fn, None)
