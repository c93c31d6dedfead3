"""Daemon worker threads for tool calls: one call at a time each, kept between calls.

A worker runs a sync function on its own thread with no event loop running there (the function
may call ``asyncio.run``), and a coroutine on the worker's own event loop, kept between calls.
After a coroutine, tasks it left behind are cancelled; a worker whose leftovers do not stop is
retired (its thread ends), so one call's leftovers never run during another call.

Hand-rolled, not a ``ThreadPoolExecutor``: its threads are not daemons (a hung tool would keep
the process from exiting), it cannot retire a worker, and its threads have no event loop.
Measured with eight async no-op tool calls at once on a 2-core machine: a thread and an event
loop started per call cost about 1.8 ms a call, a kept worker about 0.6 ms, the caller's own
loop (no isolation) about 0.2 ms.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

MAX_IDLE = 16
"""Idle workers kept for the next calls; more than that end when their call ends."""

TIDY_GRACE = 0.1
"""Seconds the tasks a coroutine left behind get to stop once cancelled."""


class Worker:
    """A daemon thread that runs the jobs handed to it, one at a time."""

    def __init__(self) -> None:
        """Start the thread; it waits for jobs."""
        self._jobs: queue.SimpleQueue[Callable[[Worker], None] | None] = queue.SimpleQueue()
        self._runner: asyncio.Runner | None = None
        self._tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        threading.Thread(target=self._serve, daemon=True, name="planexec-tool").start()

    def submit(self, job: Callable[[Worker], None]) -> None:
        """Run ``job(worker)`` on the worker's thread (it must not raise)."""
        self._jobs.put(job)

    def run_coroutine(self, coro: Coroutine[Any, Any, Any], ctx: contextvars.Context) -> Any:
        """Run a coroutine to its end on the worker's own event loop (called from a job)."""
        if self._runner is None:
            self._runner = asyncio.Runner()
            self._runner.get_loop().set_task_factory(self._track)
        return self._runner.run(coro, context=ctx)

    def _track(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        """Create a task on the worker's loop and remember it, for :meth:`_tidy`.

        ``asyncio.all_tasks(loop)`` would scan every task of the process (all loops) after
        each call: O(tasks alive) per call, so O(n²) over a run of n steps.
        """
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        self._tasks.add(task)
        return task

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            job(self)
            if not self._tidy() or not _POOL.give_back(self):
                return  # retired: what the last call left behind stays with this thread

    def _tidy(self) -> bool:
        """Cancel tasks the last coroutine left on the loop; say whether they all stopped."""
        if self._runner is None:
            return True
        loop = self._runner.get_loop()
        if loop.get_task_factory() == self._track:
            leftovers = {task for task in self._tasks if not task.done()}
        else:  # the call replaced the loop's task factory: look at every task
            leftovers = asyncio.all_tasks(loop)
        self._tasks.clear()
        if not leftovers:
            return True
        for task in leftovers:
            task.cancel()
        loop.run_until_complete(asyncio.wait(leftovers, timeout=TIDY_GRACE))
        return all(task.done() for task in leftovers)


class _Pool:
    """Idle workers, shared by the whole process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Worker] = []

    def lease(self) -> Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return Worker()

    def give_back(self, worker: Worker) -> bool:
        with self._lock:
            if len(self._idle) >= MAX_IDLE:
                return False
            self._idle.append(worker)
            return True


_POOL = _Pool()
# A forked child has none of its parent's threads: the idle workers it inherits would take jobs
# they never run. It starts with none (and makes its own background loop: background._Loop).
os.register_at_fork(after_in_child=lambda: _POOL.__init__())  # type: ignore[misc]


def lease() -> Worker:
    """Return a worker for one call: an idle one, or a new one (never waits)."""
    return _POOL.lease()


class DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """An executor whose jobs run on planexec's daemon workers (the background loop's default).

    Not the default ``ThreadPoolExecutor``: the interpreter waits for its threads at exit, so a
    hung call would keep a process from ending after Ctrl-C. A subclass only because
    asyncio takes no other kind of default executor.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on a daemon worker."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run(_: object) -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # the caller's to see
                future.set_exception(exc)

        lease().submit(run)
        return future
