"""Tool calls off the event loop, and time limits that end the wait whatever the tool does.

Every tool call runs on a daemon worker thread of its own, an async tool on that worker's
event loop (:mod:`planexec.concurrency.offloop`): a tool that blocks stalls only itself, never
the loop that runs the other steps (under ``invoke``, ``ainvoke`` and the LangGraph server). An
async tool whose author vouches it never blocks may skip that hop (:data:`RUNS_ON_LOOP`). A call
still running when its caller gives up is abandoned: counted and bounded by
:mod:`planexec.concurrency.abandoned`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Coroutine
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from planexec.concurrency.abandoned import current_scope, refusal
from planexec.concurrency.offloop import CANCEL_GRACE, OffLoopCall, OnLoopCall
from planexec.errors import ToolError

SIDE_EFFECTS = "side_effects"
"""Tool metadata key: ``False`` if the tool is declared free of side effects (the registry's
:data:`planexec.tools.registry.SIDE_EFFECTS`): such a tool may run again while an earlier call
of the same step, given up on, still runs."""

RETRY_ON_TIMEOUT = "retry_on_timeout"
"""Tool metadata key: ``True`` if a timed-out call of this tool may be retried (not the default).

Read by the step's retry layer (:mod:`planexec.execution.retries`); nothing here retries.

Set it with ``my_tool.metadata = {**(my_tool.metadata or {}), RETRY_ON_TIMEOUT: True}``.
"""


RUNS_ON_LOOP = "runs_on_loop"
"""Tool metadata key: ``True`` if an async tool may run on the loop that runs the steps.

Set it with ``registry.register(my_tool, runs_on_loop=True)``. The call skips the worker
thread's hop (about 0.2 ms a call alone, 0.3-0.4 ms a step in a busy round on a 2-core
machine: ``bench/floor.py``), as LangGraph's ``ToolNode`` runs async tools. Its author vouches
it never blocks nor stops its loop: one that does stalls every step of the run (of every run,
on a server) until it lets go. Time limits, the count of abandoned calls, scrubbing and error
reports hold as for any tool. Only a tool made from an async function can be marked (its
function is guarded so ``SystemExit`` and ``KeyboardInterrupt`` fail only its step).
"""


class StepTimeout(Exception):
    """An attempt ran past its time limit; its call was cancelled, or abandoned if it went on.

    Not a ``TimeoutError``: a timeout planexec imposes is not a transient error of the tool, and
    is retried (by :mod:`planexec.execution.retries`) only for tools whose metadata sets
    :data:`RETRY_ON_TIMEOUT`.
    """

    def __init__(self, seconds: float) -> None:
        """Record the limit that was exceeded."""
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


def is_async_tool(tool_: BaseTool) -> bool:
    """Say whether a tool has its own async implementation (else it runs in a thread)."""
    if hasattr(tool_, "coroutine"):  # StructuredTool and Tool wrap a function, maybe a coroutine
        return tool_.coroutine is not None
    return type(tool_)._arun is not BaseTool._arun


async def call_isolated(tool_: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """Invoke a tool off the event loop, in its own thread (async tools on their own loop).

    An async tool marked :data:`RUNS_ON_LOOP` runs on the caller's loop instead, in a task of
    its own awaited the same way.

    Cancelling the caller returns at once whatever the tool does; the tool is asked to stop
    and, if it does not within :data:`~planexec.concurrency.offloop.CANCEL_GRACE`, counted as
    abandoned until it ends. Refused with :class:`ToolError` while the bound on abandoned calls is
    reached.
    """
    scope = current_scope()
    read_only = (tool_.metadata or {}).get(SIDE_EFFECTS) is False
    if (refused := refusal(scope, tool_.name, read_only=read_only)) is not None:
        raise ToolError(refused)
    if not is_async_tool(tool_):
        return await OffLoopCall(tool_.name, scope).run(lambda: tool_.invoke(args, config), None)
    where = OnLoopCall if runs_on_loop(tool_) else OffLoopCall
    return await where(tool_.name, scope).run(None, lambda: tool_.ainvoke(args, config))


def runs_on_loop(tool_: BaseTool) -> bool:
    """Say whether a tool runs on the caller's loop.

    It does if marked :data:`RUNS_ON_LOOP` (exactly ``True``) when it was registered, which
    gave it a guarded coroutine (:func:`on_loop`). A mark set on the metadata after
    registration leaves the tool on a worker thread.
    """
    marked = (tool_.metadata or {}).get(RUNS_ON_LOOP) is True
    return marked and _guarded(getattr(tool_, "coroutine", None))


GUARDED = "__planexec_on_loop__"
"""Attribute of a coroutine function guarded by :func:`on_loop`."""


def _guarded(fn: Any) -> bool:
    if isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, GUARDED, False) is True


def on_loop(tool_: BaseTool) -> BaseTool:
    """Return a copy of an async tool made from a function, fit to run on the caller's loop.

    LangChain runs the function in a task of its own, and asyncio lets ``SystemExit`` and
    ``KeyboardInterrupt`` raised in a task escape the loop itself (the run's, or a server's):
    the guard turns those the function raises into the step's failure, worded as for a call on
    a worker thread. (Raised in a task the function starts, they still stop the caller's loop,
    as in any asyncio program; planexec's background loop, which runs them on sync runs,
    survives them.)
    """
    coroutine = getattr(tool_, "coroutine", None)
    if coroutine is None:
        raise ValueError(
            f"{tool_.name} cannot run on the loop: only a tool made from an async function "
            "can (@tool, or StructuredTool.from_function(coroutine=...))"
        )
    if _guarded(coroutine):
        return tool_
    return tool_.model_copy(update={"coroutine": _guard(tool_.name, coroutine)})


def _guard(name: str, fn: Any) -> Any:
    """Wrap an async function so exits it raises become a :class:`ToolError`.

    The wrapper keeps what LangChain reads of the function: its signature and type hints
    (``functools.wraps``; a ``functools.partial`` stays a partial, of the guarded function).
    """
    if isinstance(fn, functools.partial):
        return functools.partial(_guard(name, fn.func), *fn.args, **fn.keywords)
    if not inspect.iscoroutinefunction(fn):
        raise ValueError(
            f"{name} cannot run on the loop: its coroutine must be an async function (or a "
            f"functools.partial of one), not {type(fn).__name__}"
        )

    @functools.wraps(fn)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt) as exc:
            raise ToolError(f"the tool raised {type(exc).__name__}") from None

    setattr(guarded, GUARDED, True)
    return guarded


# Not asyncio.wait_for (nor anyio.fail_after): both wait for the cancelled work to finish.
async def with_time_limit(work: Coroutine[Any, Any, Any], seconds: float) -> Any:
    """Await ``work`` for at most ``seconds``; then cancel it and raise :class:`StepTimeout`.

    Unlike ``asyncio.wait_for``, this does not wait for the cancelled work to finish: after
    :data:`~planexec.concurrency.offloop.CANCEL_GRACE` it is left to end on its own.
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
