"""Stop starting steps when the checkpoint store fails.

LangGraph saves a step task's result with the run's checkpointer (``put_writes``) in the
background and reports a failed save only when the graph run ends, so a run whose database
went away would go on starting steps whose results cannot be kept. Before each attempt of a
step starts, :class:`StoreGuard` looks for two signs, through the run's own checkpointer (the
saver passed to ``build_graph``, or the server's):

- a save that failed: LangGraph keeps the futures of its background saves until they
  succeed; a failed one stays there. This is read through LangGraph internals
  (:func:`planexec.compat.langgraph.failed_background_saves`) and skipped if they are not
  found (``tests/unit/test_langgraph_internals.py`` fails then);
- a store that does not answer: a lookup of a thread that does not exist, through the saver's
  public ``get_tuple`` / ``aget_tuple`` (one indexed miss; callers at the same time share it,
  and an answer holds for :data:`PROBE_FRESH` seconds).

Once either is seen, the failure sticks for the rest of the executor round: no step starts (or
is recorded as skipped) after it, and the executor node raises :class:`CheckpointStoreError`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from planexec.compat.langgraph import checkpointer_of, failed_background_saves
from planexec.errors import PlanexecError

PROBE_CONFIG: RunnableConfig = {
    "configurable": {"thread_id": "planexec-store-probe", "checkpoint_ns": ""}
}
"""The lookup the probe makes: a thread nobody writes, so the answer is one indexed miss."""

PROBE_TIMEOUT = 5.0
"""Seconds the store may take to answer the probe before it counts as failed."""

PROBE_FRESH = 0.05
"""Seconds a successful probe answers for: steps starting within them are not probed again.

Many short steps starting at once would otherwise queue a probe each behind the saver's own
writes (one connection, one lock); a failed save is still checked before every step.
"""


class CheckpointStoreError(PlanexecError):
    """The checkpoint store failed during a run; no step started after it failed.

    Resume the thread when the store is back: steps whose results were saved are not run
    again; steps that were running or finished while it failed may run again.
    """


def describe_failure(exc: BaseException) -> str:
    """One line naming an exception: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


class StoreGuard:
    """Probes one run's checkpointer before steps start; remembers the first failure."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any] | None,
        *,
        asynchronous: bool,
        failed_save: Callable[[], BaseException | None] | None = None,
    ) -> None:
        """Guard ``saver`` (None: nothing to guard) through its async or its sync methods.

        ``failed_save`` returns the error of a background save that failed, if any.
        """
        self.saver = saver
        self.asynchronous = asynchronous
        self.failed_save = failed_save
        self.failure: CheckpointStoreError | None = None
        self._probe: asyncio.Future[None] | None = None
        self._answered_at = -math.inf

    @classmethod
    def of(cls, config: RunnableConfig, *, asynchronous: bool) -> StoreGuard:
        """Guard the checkpointer LangGraph is running this node with (from the node's config)."""
        saver = checkpointer_of(config)
        if saver is None:
            return cls(None, asynchronous=asynchronous)
        failed_save = failed_background_saves(config)
        return cls(saver, asynchronous=asynchronous, failed_save=failed_save)

    @classmethod
    def disabled(cls) -> StoreGuard:
        """Return a guard with nothing to guard (no checkpointer)."""
        return cls(None, asynchronous=True)

    def raise_if_failed(self) -> None:
        """Raise the store's failure if one has been seen, or a save has failed (no probe)."""
        failed = self.failed_save
        if self.failure is None and failed is not None and (error := failed()) is not None:
            self._fail(error, "a checkpoint write failed")
        if self.failure is not None:
            raise self.failure

    async def check(self) -> None:
        """Check for a failed save, then probe the store (callers at the same time share one).

        A probe that succeeded less than :data:`PROBE_FRESH` seconds ago answers for the store.
        """
        self.raise_if_failed()
        if self.saver is None or time.monotonic() - self._answered_at < PROBE_FRESH:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._run_probe(self.saver))
        await asyncio.shield(self._probe)
        self.raise_if_failed()

    async def _run_probe(self, saver: Any) -> None:
        asked_at = time.monotonic()
        try:
            if self.asynchronous:
                await asyncio.wait_for(saver.aget_tuple(PROBE_CONFIG), PROBE_TIMEOUT)
            else:  # a sync saver blocks: ask it from a worker thread of this loop
                loop = asyncio.get_running_loop()
                lookup = loop.run_in_executor(None, saver.get_tuple, PROBE_CONFIG)
                await asyncio.wait_for(lookup, PROBE_TIMEOUT)
        except NotImplementedError:
            self.saver = None  # a saver without that method: nothing can be probed
        except Exception as exc:  # any failure of the store stops new steps
            self._fail(exc)
        else:
            self._answered_at = asked_at

    def _fail(self, exc: BaseException, what: str = "the checkpoint store failed") -> None:
        if isinstance(exc, TimeoutError):
            reason = f"it did not answer within {PROBE_TIMEOUT:g} s"
        else:
            reason = describe_failure(exc)
        if self.failure is None:
            self.failure = CheckpointStoreError(f"{what} ({reason})")
