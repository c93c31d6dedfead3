"""Who Ctrl-C is for: the prompt (it leaves at once), or the editor the user is in."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]


@contextmanager
def _sigint(handler: Handler) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers (and only it gets signals)
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ctrl_c_raises() -> AbstractContextManager[None]:
    """Let Ctrl-C interrupt a prompt at once.

    ``asyncio.run`` turns Ctrl-C into a cancellation the event loop delivers only once the
    blocking ``input()`` returns; while asking, Python's own handler raises at once instead.
    """
    return _sigint(signal.default_int_handler)


def _editors_own(signum: int, frame: FrameType | None) -> None:
    """Leave Ctrl-C to the editor (vim users press it to leave insert mode)."""


def ctrl_c_for_the_editor() -> AbstractContextManager[None]:
    """Let the editor alone take Ctrl-C while it runs, as ``git commit`` does.

    The terminal sends it to both processes; without this, ``asyncio.run`` would cancel the
    run later, after the user approved the plan. A Python handler (not ``SIG_IGN``) is reset
    when the editor starts, so the editor still gets Ctrl-C as usual.
    """
    return _sigint(_editors_own)
