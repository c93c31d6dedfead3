"""Who Ctrl-C is for: the prompt (it leaves at once), or the editor the user is in."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

from rich.console import Console
from rich.text import Text

WAKE_EVERY = 0.1
"""Seconds a prompt waits for its line at a time, before it looks for a pending Ctrl-C."""

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


@contextmanager
def signals_wake_the_loop() -> Iterator[None]:
    """Wake the running loop (the main thread's) as a signal arrives, inside the block.

    The kernel may hand the process's Ctrl-C to any thread that does not block SIGINT (a
    prompt's, SQLite's, a tool's); Python then only marks it pending for the main thread, and
    a loop that sleeps in ``select`` with nothing else to do (a prompt waits in its thread)
    would run ``asyncio.run``'s handler only once something else woke it. The C handler
    writes each signal to the fd of ``signal.set_wakeup_fd``: here, a socket the loop reads.
    """
    loop = asyncio.get_running_loop()
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    for end in (reader, writer):
        end.setblocking(False)
    loop.add_reader(reader.fileno(), _drain, reader)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()


def _drain(reader: socket.socket) -> None:
    """Read what the signals wrote (woken, the loop has run their handlers)."""
    try:
        while reader.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def ctrl_c_raises() -> AbstractContextManager[None]:
    """Let Ctrl-C interrupt a prompt at once.

    ``asyncio.run`` turns Ctrl-C into a cancellation the event loop delivers only once the
    blocking ``input()`` returns; while asking, Python's own handler raises at once instead.
    """
    return _sigint(signal.default_int_handler)


def ask_line(out: Console, prompt: Text | str) -> str:
    """Print ``prompt`` on ``out`` and return the line typed; ``EOFError`` at end of input.

    The one way a CLI prompt reads its answer. Ctrl-C raises ``KeyboardInterrupt`` at once
    (:func:`ctrl_c_raises`), and so does one pressed just before the prompt:
    ``asyncio.run``'s handler only cancelled the command's task, which would learn of it
    at its next ``await``, after the answer.

    On a terminal it waits in slices of :data:`WAKE_EVERY` seconds rather than in one
    blocking read: the kernel may hand the process's Ctrl-C to any of its threads that does
    not block SIGINT (SQLite's, a tool's), and then Python only marks it pending for the main
    thread, whose read would not wake for it. Between slices the main thread runs Python
    again, and so the handler. Bytes that are not text in the terminal's encoding read as
    U+FFFD (the answer is asked again), never as an error. Anything else (a pipe, a test's
    input) is read as ``Console.input`` reads it, leniently too.
    """
    with ctrl_c_raises():
        if _cancelled_by_ctrl_c():
            raise KeyboardInterrupt
        return _read_line(out, prompt)


def _cancelled_by_ctrl_c() -> bool:
    """Tell whether the main thread's running task was asked to stop (a Ctrl-C came)."""
    if threading.current_thread() is not threading.main_thread():
        return False  # a prompt asked while the run goes on: the run itself stops
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop runs here
        return False
    return task is not None and task.cancelling() > 0


def _read_line(out: Console, prompt: Text | str) -> str:
    """Print ``prompt`` and read a line as :func:`ask_line` says."""
    stdin = sys.stdin
    try:
        fd = stdin.fileno() if os.name == "posix" and stdin.isatty() else -1
    except (AttributeError, OSError, ValueError):  # not a file
        fd = -1
    if fd < 0:
        if isinstance(stdin, io.TextIOWrapper):
            with contextlib.suppress(ValueError):  # read before: it decodes as it did
                stdin.reconfigure(errors="replace")
        try:
            return out.input(prompt)
        except UnicodeDecodeError:  # not text: an answer no menu offers, asked again
            return "\ufffd"
    out.print(prompt, end="")
    out.file.flush()
    typed = bytearray()
    while not typed.endswith(b"\n"):
        if not select.select([fd], [], [], WAKE_EVERY)[0]:
            continue
        chunk = os.read(fd, 4096)  # a terminal gives a line at most, or what Ctrl-D sent
        if not chunk:  # Ctrl-D on an empty line: the end of the input
            if not typed:
                raise EOFError
            break
        typed += chunk
    return typed.decode(stdin.encoding or "utf-8", errors="replace").removesuffix("\n")


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
