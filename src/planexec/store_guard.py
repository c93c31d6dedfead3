"""Stop starting steps when the checkpoint store fails.

LangGraph saves a step task's result with the run's checkpointer (``put_writes``) in the
background and reports a failed save only when the graph run ends, so a run whose database
went away would go on starting steps whose results cannot be kept. :class:`StoreGuard` asks
the run's own checkpointer (the one LangGraph is writing with: the saver passed to
``build_graph``, or the server's) a cheap question before each attempt of a step starts: a
lookup of a thread that does not exist, through the saver's public ``get_tuple`` /
``aget_tuple``. Once one fails, the failure sticks for the rest of the executor round: no step
starts (or is recorded as skipped) after it, and the executor node raises
:class:`CheckpointStoreError`.

What it cannot see: a store that still answers reads but refuses writes (a full disk, a
read-only replica); LangGraph then raises the failed write when the graph run ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER

from planexec.errors import PlanexecError

PROBE_CONFIG: RunnableConfig = {
    "configurable": {"thread_id": "planexec-store-probe", "checkpoint_ns": ""}
}
"""The lookup the probe makes: a thread nobody writes, so the answer is one indexed miss."""

PROBE_TIMEOUT = 5.0
"""Seconds the store may take to answer the probe before it counts as failed."""


class CheckpointStoreError(PlanexecError):
    """The checkpoint store failed during a run; no step started after it failed.

    Resume the thread when the store is back: steps whose results were saved are not run
    again; steps that were running or finished while it failed may run again.
    """


def describe(exc: BaseException) -> str:
    """One line naming an exception: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


class StoreGuard:
    """Probes one run's checkpointer before steps start; remembers the first failure."""

    def __init__(self, saver: BaseCheckpointSaver[Any] | None, *, asynchronous: bool) -> None:
        """Guard ``saver`` (None: nothing to guard) through its async or its sync methods."""
        self.saver = saver
        self.asynchronous = asynchronous
        self.failure: CheckpointStoreError | None = None
        self._probe: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, config: RunnableConfig, *, asynchronous: bool) -> StoreGuard:
        """Guard the checkpointer LangGraph is running this node with (from the node's config)."""
        saver = config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINTER)
        found = saver if isinstance(saver, BaseCheckpointSaver) else None
        return cls(found, asynchronous=asynchronous)

    @classmethod
    def disabled(cls) -> StoreGuard:
        """Return a guard with nothing to guard (no checkpointer)."""
        return cls(None, asynchronous=True)

    def raise_if_failed(self) -> None:
        """Raise the store's failure if a probe has seen one (no new probe)."""
        if self.failure is not None:
            raise self.failure

    async def check(self) -> None:
        """Probe the store on the running loop (callers at the same time share one probe)."""
        self.raise_if_failed()
        if self.saver is None:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._run_probe())
        await asyncio.shield(self._probe)
        self.raise_if_failed()

    async def _run_probe(self) -> None:
        assert self.saver is not None
        saver = self.saver
        try:
            if self.asynchronous:
                await asyncio.wait_for(saver.aget_tuple(PROBE_CONFIG), PROBE_TIMEOUT)
            else:  # a sync saver blocks: ask it from a worker thread of this loop
                loop = asyncio.get_running_loop()
                lookup = loop.run_in_executor(None, saver.get_tuple, PROBE_CONFIG)
                await asyncio.wait_for(lookup, PROBE_TIMEOUT)
        except NotImplementedError:
            self.saver = None  # a saver without that method: nothing can be probed
        except Exception as exc:  # noqa: BLE001 - any failure of the store stops new steps
            self._fail(exc)

    def check_blocking(self) -> None:
        """Probe from a thread with no event loop (the sync executor node, after its steps)."""
        self.raise_if_failed()
        if self.saver is None or self.asynchronous:
            return
        try:
            self.saver.get_tuple(PROBE_CONFIG)
        except NotImplementedError:
            self.saver = None
        except Exception as exc:  # noqa: BLE001 - see _run_probe
            self._fail(exc)
        self.raise_if_failed()

    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, TimeoutError):
            reason = f"it did not answer within {PROBE_TIMEOUT:g} s"
        else:
            reason = describe(exc)
        if self.failure is None:
            self.failure = CheckpointStoreError(f"the checkpoint store failed ({reason})")
