"""When a step may start, and how sync runs hand steps to an event loop.

The executor node calls one durable task per step, up front and in plan order (so a resumed run
maps finished tasks back to the same steps); each task then waits at the :class:`DependencyGate`
for the steps it depends on, so a step starts as soon as its own dependencies are done, and
then for one of the round's :class:`~planexec.execution.slots.SlotPool` slots (the gate tells
the pool which steps just became ready, so a free slot goes to the most urgent of them). Under a
sync ``invoke`` the tasks run on LangGraph's threads and hand their step to one
:class:`StepLoop` per round, where every step of the round shares one event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from planexec.execution.outcomes import StepOutcome
from planexec.execution.slots import SlotPool
from planexec.execution.wakeups import wake_soon
from planexec.runtime.offloop import calls_running_on


# Hand-rolled: outcomes are published from LangGraph's threads (a replayed task's callback) and
# awaited on an event loop; asyncio's and anyio's events are neither thread-safe nor keyed.
class DependencyGate:
    """Outcomes of finished steps, awaitable from any event loop, published from any thread."""

    def __init__(
        self,
        known: dict[int, StepOutcome],
        to_run: Mapping[int, Sequence[int]] | None = None,
        slots: SlotPool | None = None,
    ) -> None:
        """Start with the outcomes of steps finished in earlier rounds.

        ``to_run`` maps the steps of this round to their dependencies: ``slots`` is told when
        all of a step's are done (at once, or when the last one is published), and when a
        step is published (it will not ask for a slot any more, e.g. a replayed one).
        """
        self._outcomes = dict(known)
        self._lock = threading.Lock()
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self._slots = slots
        self._missing: dict[int, set[int]] = {}
        self._dependents: dict[int, list[int]] = {}
        for sid, deps in (to_run or {}).items():
            self._missing[sid] = {d for d in deps if d not in self._outcomes}
            for dep in self._missing[sid]:
                self._dependents.setdefault(dep, []).append(sid)
        if slots is not None:  # all at once: the pool ranks them together
            slots.expect([sid for sid, missing in self._missing.items() if not missing])

    def add(self, to_run: Mapping[int, Sequence[int]]) -> None:
        """Add steps (with their dependencies) to a round under way: a plan that streams.

        The slots are told at once which of them are ready, so they are ranked together.
        """
        ready: list[int] = []
        with self._lock:
            for sid, deps in to_run.items():
                self._missing[sid] = {d for d in deps if d not in self._outcomes}
                for dep in self._missing[sid]:
                    self._dependents.setdefault(dep, []).append(sid)
                if not self._missing[sid]:
                    ready.append(sid)
        if self._slots is not None:
            self._slots.expect(ready)

    def publish(self, step_id: int, outcome: StepOutcome) -> None:
        """Record a step's outcome (the first one wins) and wake whoever waits for it."""
        ready: list[int] = []
        with self._lock:
            if step_id in self._outcomes:
                return
            self._outcomes[step_id] = outcome
            waiters = self._waiters.pop(step_id, [])
            for sid in self._dependents.pop(step_id, []):
                self._missing[sid].discard(step_id)
                if not self._missing[sid]:
                    ready.append(sid)
        if self._slots is not None:  # before the wake-ups: the pool knows who comes
            self._slots.forget(step_id)
            self._slots.expect(ready)
        for fut in waiters:
            wake_soon(fut, _resolve)

    async def wait_async(self, ids: list[int]) -> dict[int, StepOutcome]:
        """Await every step in ``ids`` without holding a thread; return their outcomes."""
        loop = asyncio.get_running_loop()
        pending = []
        with self._lock:
            for i in ids:
                if i not in self._outcomes:
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiters.setdefault(i, []).append(fut)
                    pending.append(fut)
        if pending:
            await asyncio.gather(*pending)
        with self._lock:
            return {i: self._outcomes[i] for i in ids}


def _resolve(fut: asyncio.Future[None]) -> None:
    """Wake a waiter unless it already gave up (cancelled)."""
    if not fut.done():
        fut.set_result(None)


# Not anyio's start_blocking_portal: leaving a portal waits for work the loop abandoned (e.g. a
# timed-out sync model call in the loop's default executor); closing this loop does not.
class StepLoop:
    """An event loop in a daemon thread: sync step tasks hand their step to it and wait."""

    def __init__(self) -> None:
        """Start the loop's thread."""
        self.loop = asyncio.new_event_loop()
        self._stopping = False
        self._watched: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="planexec-steps")
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopping:
            self._survive(self.loop.run_forever)
        self._survive(lambda: self.loop.run_until_complete(self.loop.shutdown_asyncgens()))
        self.loop.close()

    @staticmethod
    def _survive(run: Callable[[], Any]) -> None:
        """Run the loop, surviving an exit a task raised.

        ``SystemExit`` and ``KeyboardInterrupt`` raised in a task escape ``run_forever`` after
        the task holds them; the steps waiting on the loop still need it.
        """
        with contextlib.suppress(BaseException):
            run()

    def run(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run a coroutine on the loop, in the caller's context (config, stream writer); block."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        ctx = contextvars.copy_context()

        def start() -> None:
            task = self.loop.create_task(make(), context=ctx)
            task.add_done_callback(lambda t: _copy_outcome(t, done))

        self.loop.call_soon_threadsafe(start)
        return done.result()

    def close(self) -> None:
        """Stop the loop once what is left on it has ended; return at once.

        A tool call still running on it (timed out and counted as abandoned) keeps the loop and
        its daemon thread until it ends, as a worker thread keeps an abandoned call: nothing
        cancels it again. Then the tasks left behind are cancelled, once each, as a worker
        cancels a call's leftovers, and the loop stops when they (and any they start) have
        ended; its async generators are closed on its own thread.
        """
        with contextlib.suppress(RuntimeError):  # closed already
            self.loop.call_soon_threadsafe(self._stop_when_idle)

    def _stop_when_idle(self, _: object = None) -> None:
        """Stop the loop if nothing is left on it; else wait for what is, and look again."""
        if self._stopping:  # a callback of a task that ended with the last ones
            return
        calls = calls_running_on(self.loop)
        left = calls or [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        if not left:
            self._stopping = True
            self.loop.stop()
            return
        for task in left:
            if task not in self._watched:
                self._watched.add(task)
                if not calls:  # leftovers, once no call runs on: cancelled once each
                    task.cancel()
                task.add_done_callback(self._stop_when_idle)


def _copy_outcome(task: asyncio.Task[Any], done: concurrent.futures.Future[Any]) -> None:
    if task.cancelled():
        done.cancel()
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())
