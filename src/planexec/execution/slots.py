"""The round's slots (``max_parallel_steps``), given to the step with the longest chain first.

When more steps are ready than slots are free, the step with the longest remaining chain of
dependents starts first (:func:`chain_ranks`): the critical path is never queued behind steps
that nothing waits for. A chain is weighted by each tool's declared typical latency
(``tool.metadata["typical_latency"]``, seconds) if some tool declares one, else by step count.

The :class:`~planexec.execution.scheduling.DependencyGate` tells the pool which steps just became
ready (:meth:`SlotPool.expect`), before those steps have woken up to ask: a slot freed at that
moment is kept for the most urgent of them instead of going to whichever step asks first.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import threading
from collections.abc import AsyncIterator, Iterable
from statistics import fmean

from planexec.execution.wakeups import wake_soon
from planexec.plan.doc import topological_order
from planexec.state import StepDoc
from planexec.tools.registry import TYPICAL_LATENCY as TYPICAL_LATENCY  # re-exported
from planexec.tools.registry import ToolRegistry

Rank = tuple[float, int]
"""A step's place in line for a slot: lower first (minus its chain length, its plan position)."""


def chain_ranks(steps: list[StepDoc], tools: ToolRegistry) -> dict[int, Rank]:
    """Rank steps by the length of the longest chain they start (longest first, then plan order).

    A step's chain is its own weight plus the longest chain among the steps that depend on it.
    """
    declared: dict[str, float] = {}
    for name in {s["tool"] for s in steps if s["tool"] in tools}:
        value = tools.typical_latency(str(name))
        if value is not None:
            declared[str(name)] = value
    default = fmean(declared.values()) if declared else 1.0
    ids = {s["id"] for s in steps}
    dependents: dict[int, list[int]] = {}
    for step in steps:
        for dep in step["depends_on"]:
            if dep in ids:
                dependents.setdefault(dep, []).append(step["id"])
    chain: dict[int, float] = {}
    for step in reversed(topological_order(steps)):
        below = max((chain[c] for c in dependents.get(step["id"], [])), default=0.0)
        chain[step["id"]] = declared.get(str(step["tool"]), default) + below
    return {s["id"]: (-chain[s["id"]], i) for i, s in enumerate(steps)}


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


# Hand-rolled: asyncio.Semaphore serves waiters first come, first served, and cannot keep a
# slot for a step that is ready but not yet asking; steps may be announced from other threads.
class SlotPool:
    """At most ``size`` holders at once; a free slot goes to the best-ranked ready step."""

    def __init__(self, size: int, ranks: dict[int, Rank]) -> None:
        """Make ``size`` slots for steps ranked by ``ranks`` (unranked steps come last)."""
        self._free = max(1, size)
        self._ranks = ranks
        self._lock = threading.Lock()
        self._expected: set[int] = set()
        self._reserved: set[int] = set()
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._queue: list[tuple[Rank, int]] = []  # steps waiting or expected, best first

    def _line_up(self, sid: int) -> None:
        rank = self._ranks.get(sid, (0.0, len(self._ranks) + sid))
        heapq.heappush(self._queue, (rank, sid))

    def _dispatch(self) -> None:
        """Give free slots to the best steps waiting or expected (call with the lock held)."""
        while self._free > 0 and self._queue:
            _, best = heapq.heappop(self._queue)
            if best in self._waiting:
                fut = self._waiting.pop(best)
                wake_soon(fut, _wake)
            elif best in self._expected:
                self._expected.discard(best)
                self._reserved.add(best)
            else:  # an entry left from before it was served or forgotten
                continue
            self._free -= 1

    def rank(self, ranks: dict[int, Rank]) -> None:
        """Rank steps that joined the round late (a plan that streamed): for their next turn."""
        with self._lock:
            self._ranks = {**self._ranks, **ranks}

    def expect(self, sids: Iterable[int]) -> None:
        """Note that these steps are ready and will ask for a slot soon (from any thread)."""
        with self._lock:
            for sid in sids:
                if sid not in self._expected and sid not in self._reserved:
                    self._expected.add(sid)
                    self._line_up(sid)
            self._dispatch()

    def forget(self, sid: int) -> None:
        """Note that step ``sid`` will not ask now (it ended, or was skipped): free its slot."""
        with self._lock:
            self._expected.discard(sid)
            if sid in self._reserved:
                self._reserved.discard(sid)
                self._free += 1
                self._dispatch()

    @contextlib.asynccontextmanager
    async def hold(self, sid: int) -> AsyncIterator[None]:
        """Hold a slot for step ``sid`` while the block runs (wait for one first)."""
        await self._acquire(sid)
        try:
            yield
        finally:
            # released on the loop's next turn: a step that just ended publishes its outcome
            # first (no await in between), so its dependents can compete for its slot
            with contextlib.suppress(RuntimeError):  # a closing loop: nobody will ask
                asyncio.get_running_loop().call_soon(self._release)

    def _release(self) -> None:
        with self._lock:
            self._free += 1
            self._dispatch()

    async def _acquire(self, sid: int) -> None:
        with self._lock:
            if sid in self._reserved:
                self._reserved.discard(sid)
                return
            self._expected.discard(sid)
            fut = asyncio.get_running_loop().create_future()
            self._waiting[sid] = fut
            self._line_up(sid)
            self._dispatch()
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                if self._waiting.pop(sid, None) is None:  # granted as it was cancelled
                    self._free += 1
                    self._dispatch()
            raise
