"""Waking a future of an event loop from any thread, without a system call from its own.

``loop.call_soon_threadsafe`` writes to the loop's self-pipe on every call, so that a loop asleep
in ``select`` wakes up: a system call (and a release of the GIL) that only another thread needs.
A step's slot and its dependencies are mostly handed over on the loop that waits for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def wake_soon(fut: asyncio.Future[Any], wake: Callable[[asyncio.Future[Any]], None]) -> None:
    """Call ``wake(fut)`` on ``fut``'s loop, soon: directly from its own thread, else safely."""
    loop = fut.get_loop()
    if asyncio._get_running_loop() is loop:  # this thread runs it: no self-pipe write needed
        loop.call_soon(wake, fut)
    else:
        loop.call_soon_threadsafe(wake, fut)
