"""A long-lived event loop on a daemon thread, for clients that must outlive any caller's loop.

planexec keeps one (:mod:`planexec.concurrency.background`): a client bound to a loop that a
caller closes (``asyncio.run`` under ``invoke``) breaks, so this one never closes. The loop is
made on first use, and again in a forked child (a loop's thread does not survive a fork). An
exit a callback raises ends that callback, never the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any


class DaemonLoop:
    """An event loop on a daemon thread, made once per process (again after a fork)."""

    def __init__(
        self,
        name: str,
        executor: Callable[[], concurrent.futures.Executor] | None = None,
        task_factory: Any = None,
    ) -> None:
        """Name the thread; ``executor`` makes the loop's default executor (else asyncio's).

        ``task_factory``: the loop's task factory (``loop.set_task_factory``), if any.
        """
        self.name, self._executor, self._task_factory = name, executor, task_factory
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """Return the loop, made (again) if this process has none running."""
        loop, thread, here = self._loop, self._thread, self._pid == os.getpid()
        if loop is not None and thread is not None and thread.is_alive() and here:
            return loop  # the common case: no lock
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(loop, ready), name=self.name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            assert self._loop is not None
            return self._loop

    def thread(self) -> threading.Thread | None:
        """Return the loop's thread (None: no loop made yet)."""
        return self._thread

    def pid(self) -> int:
        """Return the process id the loop was made in (0: none made yet)."""
        return self._pid

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        if self._executor is not None:
            loop.set_default_executor(self._executor())
        if self._task_factory is not None:
            loop.set_task_factory(self._task_factory)
        loop.call_soon(ready.set)
        while True:  # an exit raised by a callback ends that callback, never the loop
            try:
                loop.run_forever()
            except BaseException:  # its caller was told through its future
                continue
