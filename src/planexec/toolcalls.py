"""Tool calls off the event loop: a timeout ends the wait whatever the tool does.

Every tool call runs on a daemon worker thread of its own (:mod:`planexec.workers`); an async
tool runs there on the worker's event loop, so a tool that blocks (``time.sleep``, a CPU loop,
a blocking driver) stalls only itself, never the loop that runs the other steps (under
``invoke``, ``ainvoke`` and the LangGraph server).
The caller awaits a plain future, so cancelling the caller (a timeout) returns at once even if
the tool swallows ``CancelledError`` or never yields.

A call that is still running when its caller gives up is *abandoned*: async tools are
cancelled on their loop, threads cannot be killed, so the call may go on. Abandoned calls are
counted process-wide (:func:`abandoned_calls`) until they really end, and bounded: a step never
starts a call while an earlier call of the same step is still running, and no call starts
while ``max_abandoned_calls`` abandoned calls are running in the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from planexec import workers
from planexec.errors import ToolError

RETRY_ON_TIMEOUT = "retry_on_timeout"
"""Tool metadata key: ``True`` if a timed-out call of this tool may be retried (not the default).

Set it with ``my_tool.metadata = {**(my_tool.metadata or {}), RETRY_ON_TIMEOUT: True}``.
"""

CANCEL_GRACE = 0.1
"""Seconds a cancelled call may take to stop before it is counted as abandoned."""

DEFAULT_MAX_ABANDONED = 4
"""Bound on abandoned calls for calls made outside a step (see ``Context.max_abandoned_calls``)."""


class StepTimeout(Exception):
    """An attempt ran past its time limit; its call was cancelled, or abandoned if it went on.

    Not a ``TimeoutError``: a timeout planexec imposes is not a transient error of the tool, and
    is retried only for tools whose metadata sets :data:`RETRY_ON_TIMEOUT`.
    """

    def __init__(self, seconds: float) -> None:
        """Record the limit that was exceeded."""
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


class AbandonedCall(TypedDict):
    """A tool call still running after its caller gave up on it."""

    tool: str
    thread_id: str | None
    step: int | None
    started_at: float
    abandoned_at: float


@dataclass(frozen=True)
class CallScope:
    """Who makes the tool calls of the current attempt, and the process-wide bound they obey."""

    thread_id: str | None
    step: int | None
    max_abandoned: int


_SCOPE: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar(
    "planexec_call_scope", default=None
)


@contextlib.contextmanager
def call_scope(scope: CallScope) -> Iterator[None]:
    """Attribute the tool calls started inside (and in tasks created inside) to ``scope``."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


class _Registry:
    """Abandoned calls of this process that are still running (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[int, AbandonedCall] = {}

    def add(self, key: int, entry: AbandonedCall) -> None:
        with self._lock:
            self._calls[key] = entry

    def remove(self, key: int) -> None:
        with self._lock:
            self._calls.pop(key, None)

    def snapshot(self) -> list[AbandonedCall]:
        with self._lock:
            return [AbandonedCall(**entry) for entry in self._calls.values()]


_ABANDONED = _Registry()


def abandoned_calls() -> list[AbandonedCall]:
    """Return the tool calls of this process that timed out and are still running."""
    return _ABANDONED.snapshot()


class _OffLoopCall:
    """One call on a worker thread of its own; an async function runs on the worker's loop."""

    def __init__(self, name: str, scope: CallScope | None, *, counted: bool = True) -> None:
        self.name = name
        self.scope = scope
        self.counted = counted
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._finished = False
        self._abandoned = False
        self._cancel_requested = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def start(
        self, sync_fn: Callable[[], Any] | None, make: Callable[[], Coroutine[Any, Any, Any]] | None
    ) -> tuple[asyncio.Future[Any], asyncio.Future[None]]:
        """Hand the call to a worker; return (its result, its end) as futures of this loop."""
        caller = asyncio.get_running_loop()
        result: asyncio.Future[Any] = caller.create_future()
        ended: asyncio.Future[None] = caller.create_future()
        ctx = contextvars.copy_context()

        def settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
            # the caller's loop may be closed by now (an abandoned call): then drop the outcome
            with contextlib.suppress(RuntimeError):
                caller.call_soon_threadsafe(_settle, fut, value, exc)

        def job(worker: workers.Worker) -> None:
            try:
                if make is not None:
                    value = worker.run_coroutine(self._body(make), ctx)
                else:
                    assert sync_fn is not None
                    value = ctx.run(sync_fn)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                settle(result, None, exc)
            else:
                settle(result, value, None)
            finally:
                self._finish()
                settle(ended, None, None)

        workers.lease().submit(job)
        return result, ended

    async def _body(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            if self._cancel_requested:
                raise asyncio.CancelledError
        try:
            return await make()
        finally:
            with self._lock:
                self._loop = None

    def cancel(self) -> None:
        """Ask the call to stop: cancel an async tool on its loop (a thread cannot be stopped)."""
        with self._lock:
            self._cancel_requested = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed: it has ended
                loop.call_soon_threadsafe(task.cancel)

    def abandon(self) -> bool:
        """Count the call as abandoned unless it has ended; say whether it was."""
        with self._lock:
            if self._finished or not self.counted:
                return False
            self._abandoned = True
            scope = self.scope
            _ABANDONED.add(
                id(self),
                AbandonedCall(
                    tool=self.name,
                    thread_id=scope.thread_id if scope else None,
                    step=scope.step if scope else None,
                    started_at=self.started_at,
                    abandoned_at=time.time(),
                ),
            )
            return True

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            if self._abandoned:
                _ABANDONED.remove(id(self))


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the caller gave up: the outcome is dropped
        return
    if exc is not None and (not isinstance(exc, Exception) or isinstance(exc, StopIteration)):
        # raised by the tool itself (CancelledError, SystemExit, ...): not the caller's
        # cancellation nor the process's exit, and futures refuse StopIteration
        fut.set_exception(ToolError(f"the tool raised {type(exc).__name__}"))
    elif exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


async def _await_off_loop(
    call: _OffLoopCall,
    sync_fn: Callable[[], Any] | None,
    make: Callable[[], Coroutine[Any, Any, Any]] | None,
) -> Any:
    result, ended = call.start(sync_fn, make)
    try:
        return await result
    except asyncio.CancelledError:
        call.cancel()
        try:
            if make is not None:  # an async tool may stop when cancelled; a thread cannot
                await asyncio.wait({ended}, timeout=CANCEL_GRACE)
        finally:
            call.abandon()
        raise


async def run_in_thread(fn: Callable[[], Any], name: str = "call") -> Any:
    """Run a blocking function in a daemon thread and await it; cancelling abandons the thread.

    For planexec's own blocking work (files, model construction): not counted or bounded.
    """
    return await _await_off_loop(_OffLoopCall(name, None, counted=False), fn, None)


def _is_async_tool(tool_: BaseTool) -> bool:
    """Say whether a tool has its own async implementation (else it runs in a thread)."""
    if hasattr(tool_, "coroutine"):  # StructuredTool and Tool wrap a function, maybe a coroutine
        return tool_.coroutine is not None
    return type(tool_)._arun is not BaseTool._arun


def _refusal(scope: CallScope, name: str) -> str | None:
    """Say why no call may start now (the step's earlier call runs on, or too many do)."""
    running = _ABANDONED.snapshot()
    own = [  # the same step's call of the same tool (a new task's step 1 is another step)
        c
        for c in running
        if c["thread_id"] == scope.thread_id and c["step"] == scope.step and c["tool"] == name
    ]
    if scope.step is not None and own:
        since = time.time() - own[0]["abandoned_at"]
        return (
            f"not started: an earlier call of this step ({own[0]['tool']}) timed out and is "
            f"still running ({since:.1f} s after it was abandoned); a step never runs twice at once"
        )
    if len(running) >= scope.max_abandoned:
        return (
            f"not started: {len(running)} tool calls that timed out are still running in this "
            f"process (max_abandoned_calls is {scope.max_abandoned}); {name} starts once fewer run"
        )
    return None


async def call_tool(tool_: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """Invoke a tool off the event loop, in its own thread (async tools on their own loop).

    Cancelling the caller returns at once whatever the tool does; the tool is asked to stop
    and, if it does not within :data:`CANCEL_GRACE`, counted as abandoned until it ends.
    Refused with :class:`ToolError` while the bound on abandoned calls is reached.
    """
    scope = _SCOPE.get() or CallScope(None, None, DEFAULT_MAX_ABANDONED)
    if (refused := _refusal(scope, tool_.name)) is not None:
        raise ToolError(refused)
    call = _OffLoopCall(tool_.name, scope)
    if _is_async_tool(tool_):
        return await _await_off_loop(call, None, lambda: tool_.ainvoke(args, config))
    return await _await_off_loop(call, lambda: tool_.invoke(args, config), None)


async def within(work: Coroutine[Any, Any, Any], seconds: float) -> Any:
    """Await ``work`` for at most ``seconds``; then cancel it and raise :class:`StepTimeout`.

    Unlike ``asyncio.wait_for``, this does not wait for the cancelled work to finish: after
    :data:`CANCEL_GRACE` it is left to end on its own.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=2 * CANCEL_GRACE)  # a cancelled tool call stops waiting
    task.add_done_callback(_consume)  # at once and counts its call as abandoned if it runs on
    raise StepTimeout(seconds)


def _consume(task: asyncio.Task[Any]) -> None:
    """Retrieve an abandoned task's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def retries_timeouts(tool_: BaseTool | None) -> bool:
    """Say whether a tool declared its timed-out calls safe to retry (metadata, not default)."""
    return tool_ is not None and bool((tool_.metadata or {}).get(RETRY_ON_TIMEOUT, False))


def abandoned_of(thread_id: str | None, step: int | None) -> list[AbandonedCall]:
    """Return the abandoned calls of one step of one thread that are still running."""
    return [c for c in _ABANDONED.snapshot() if c["thread_id"] == thread_id and c["step"] == step]
