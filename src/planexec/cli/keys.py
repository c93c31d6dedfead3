"""Who Ctrl-C is for: the prompt (it leaves at once), or the editor the user is in."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]


@contextmanager
def _sigint(handler: Handler, loop: asyncio.AbstractEventLoop | None = None) -> Iterator[None]:
    """Let ``handler`` take Ctrl-C inside the block.

    Only the main thread may set signal handlers (and only it gets signals): from another
    thread (a prompt asked while the run goes on), the main thread's ``loop`` sets it, or,
    with no such loop, nothing changes.
    """
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
        return
    if loop is None or loop.is_closed():
        yield
        return
    previous = _in_main_thread(loop, lambda: signal.signal(signal.SIGINT, handler))
    try:
        yield
    finally:
        _in_main_thread(loop, lambda: signal.signal(signal.SIGINT, previous))


def _in_main_thread(loop: asyncio.AbstractEventLoop, call: Callable[[], Any]) -> Any:
    """Run ``call`` on ``loop`` (the main thread's) and return what it returns."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(call())
        except BaseException as exc:  # handed back to the waiting thread
            done.set_exception(exc)

    loop.call_soon_threadsafe(run)
    return done.result(timeout=10)


def ctrl_c_raises() -> AbstractContextManager[None]:
    """Let Ctrl-C interrupt a prompt at once.

    ``asyncio.run`` turns Ctrl-C into a cancellation the event loop delivers only once the
    blocking ``input()`` returns; while asking, Python's own handler raises at once instead.
    """
    return _sigint(signal.default_int_handler)


def _editors_own(signum: int, frame: FrameType | None) -> None:
    """Leave Ctrl-C to the editor (vim users press it to leave insert mode)."""


def ctrl_c_for_the_editor(
    loop: asyncio.AbstractEventLoop | None = None,
) -> AbstractContextManager[None]:
    """Let the editor alone take Ctrl-C while it runs, as ``git commit`` does.

    The terminal sends it to both processes; without this, ``asyncio.run`` would cancel the
    run later, after the user approved the plan. A Python handler (not ``SIG_IGN``) is reset
    when the editor starts, so the editor still gets Ctrl-C as usual.
    """
    return _sigint(_editors_own, loop)
