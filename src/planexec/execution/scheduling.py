"""When a step may start.

The executor node calls one durable task per step, up front and in plan order (so a resumed run
maps finished tasks back to the same steps); each task then waits at the :class:`DependencyGate`
for the steps it depends on, so a step starts as soon as its own dependencies are done, and
then for one of the round's :class:`~planexec.execution.slots.SlotPool` slots (the gate tells
the pool which steps just became ready, so a free slot goes to the most urgent of them). Under a
sync ``invoke`` the tasks run on LangGraph's threads and hand their step to planexec's background
loop (:mod:`planexec.concurrency.background`), where every step runs, as on an async run's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence

from planexec.execution.slots import SlotPool
from planexec.execution.wakeups import wake_soon
from planexec.state import StepOutcome


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

    def has(self, step_id: int) -> bool:
        """Say whether a step's outcome is known."""
        with self._lock:
            return step_id in self._outcomes

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
