"""The one module that touches LangGraph's private names, each behind a small typed function.

Every function's docstring names the private name it reads, why planexec needs it, and the
public API to move to (or "none yet"). Where a public API exists it is used instead:
:func:`runtime_of` reads a config's :class:`~langgraph.runtime.Runtime` through
:func:`langgraph.runtime.get_runtime`, and :func:`parent_task_id` and :func:`node_checkpoint`
read its public ``execution_info``. ``tests/unit/test_langgraph_internals.py`` runs each
function through a real graph and fails with "LangGraph changed <name>: see
planexec/compat/langgraph.py" when a name is gone or its meaning changed; checked from the
lowest supported langgraph (pyproject.toml) to the newest installed.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph._internal._constants import (
    CONFIG_KEY_CALL,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    RESUME,
    RETURN,
)
from langgraph.checkpoint.base import BaseCheckpointSaver, PendingWrite
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import StreamWriter

CONFIGURABLE = "configurable"
"""RunnableConfig's public key for per-run values (what langgraph.constants calls ``CONF``)."""


def _configurable(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = config.get(CONFIGURABLE) if config else None
    return value if isinstance(value, Mapping) else {}


# -- public APIs, read from a given config ---------------------------------------------------


def runtime_of(config: RunnableConfig | None) -> Runtime[Any] | None:
    """Return the :class:`Runtime` LangGraph gave the task that ``config`` belongs to, if any.

    Public: :func:`langgraph.runtime.get_runtime`, asked in a copy of the current context
    whose current config is ``config`` (a node's config may be read away from the node's
    own context, e.g. on another event loop). None outside a graph task.
    """
    if not config:
        return None

    def read() -> Any:
        var_child_runnable_config.set(config)
        return get_runtime()

    try:
        runtime = contextvars.copy_context().run(read)
    except (KeyError, RuntimeError):  # no configurable, or no config at all
        return None
    return runtime if isinstance(runtime, Runtime) else None


def parent_task_id(config: RunnableConfig | None) -> str | None:
    """Return the id of the graph task a run with ``config`` is called from (None: a root run).

    planexec needs it to tell a nested run (a graph invoked from a parent graph's node or
    tool, whose config LangGraph passes on) from a root run, which holds the thread's lock.
    Public: ``Runtime.execution_info.task_id`` (langgraph 1.2.12 has it), read through
    :func:`runtime_of`. It replaces the private ``__pregel_task_id`` key.
    """
    runtime = runtime_of(config)
    info = runtime.execution_info if runtime is not None else None
    return info.task_id if info is not None and info.task_id else None


# -- private names, with no public API yet ---------------------------------------------------


def checkpointer_of(config: RunnableConfig | None) -> BaseCheckpointSaver[Any] | None:
    """Return the checkpointer LangGraph is running the task of ``config`` with.

    Private: ``CONFIG_KEY_CHECKPOINTER`` (``"__pregel_checkpointer"``; re-exported by
    ``langgraph.constants`` "to be removed in v2"). planexec needs the run's own saver (the
    one passed to ``compile``, or the server's) to probe the store before each step, to find
    an earlier attempt's task results, and to lock the thread a nested run writes to.
    Public API to move to: none yet (``Runtime`` carries the store, not the checkpointer).
    """
    saver = _configurable(config).get(CONFIG_KEY_CHECKPOINTER)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def is_resuming(config: RunnableConfig | None) -> bool:
    """Say whether the run of ``config`` resumes a thread (a ``Command(resume=...)``, a retry).

    Private: ``CONFIG_KEY_RESUMING`` (``"__pregel_resuming"``). planexec needs it to look for
    what an earlier attempt of a node finished only when there was one. Public API to move
    to: none yet.
    """
    return bool(_configurable(config).get(CONFIG_KEY_RESUMING))


def node_checkpoint(
    config: RunnableConfig,
) -> tuple[BaseCheckpointSaver[Any], RunnableConfig] | None:
    """Return the saver and the checkpoint a resumed node's superstep started from.

    None on a fresh run (no earlier attempt of this node) or without a checkpointer. The
    checkpoint is the one of the node's own graph (its namespace without the node's segment),
    read from the public ``Runtime.execution_info`` (``checkpoint_id``, ``checkpoint_ns``,
    ``thread_id``); the saver and "resuming" are private (:func:`checkpointer_of`,
    :func:`is_resuming`). Its ``get_tuple`` / ``aget_tuple`` holds the pending writes that
    :func:`task_results` reads.
    """
    saver = checkpointer_of(config)
    if saver is None or not is_resuming(config):
        return None
    runtime = runtime_of(config)
    info = runtime.execution_info if runtime is not None else None
    if info is None or not info.checkpoint_id:
        return None
    graph_ns = info.checkpoint_ns.rpartition("|")[0]  # the node's graph
    where = {"thread_id": info.thread_id, "checkpoint_ns": graph_ns}
    return saver, {"configurable": {**where, "checkpoint_id": info.checkpoint_id}}


def task_results(pending_writes: Sequence[PendingWrite] | None) -> list[Any]:
    """Return the results of the ``@task`` calls a checkpoint's pending writes hold.

    Private: the ``RETURN`` channel (``"__return__"``) LangGraph saves a task's return value
    to, until the node that called it ends. planexec needs it to find the steps an earlier
    attempt of a planner or replanner run finished (their results), so that a resumed run
    does not run them twice. Public API to move to: none yet (the functional API's
    ``Runtime.previous`` holds an entrypoint's last return value, not its tasks').
    """
    return [value for _, channel, value in pending_writes or () if channel == RETURN]


def holds_answer(pending_writes: Sequence[PendingWrite] | None) -> bool:
    """Say whether a checkpoint's pending writes hold an answer to an interrupt (a resume value).

    Private: the ``RESUME`` channel (``"__resume__"``) LangGraph saves a
    ``Command(resume=...)`` value to before it runs the interrupted superstep again. planexec
    needs it so that the speculator, run again in the superstep whose approval was just
    answered, starts no new step (:mod:`planexec.nodes.speculator`). Public API to move to:
    none yet.
    """
    return any(channel == RESUME for _, channel, _ in pending_writes or ())


def with_stream_writer(configurable: Mapping[str, Any], writer: StreamWriter) -> dict[str, Any]:
    """Return a copy of a task's ``configurable`` whose calls stream through ``writer``.

    Private: ``CONFIG_KEY_RUNTIME`` (``"__pregel_runtime"``), where LangGraph keeps the
    task's runtime that :func:`langgraph.config.get_stream_writer` reads. planexec needs it
    to give a nested call (a tool, a model) a stream writer that scrubs secrets. The copy is
    unchanged if ``configurable`` holds no runtime. Public API to move to: none yet
    (``Runtime.override`` makes the runtime; nothing public hands it to a nested call).
    """
    copy = dict(configurable)
    runtime = copy.get(CONFIG_KEY_RUNTIME)
    if isinstance(runtime, Runtime):
        copy[CONFIG_KEY_RUNTIME] = runtime.override(stream_writer=writer)
    return copy


def failed_background_saves(config: RunnableConfig) -> Callable[[], BaseException | None] | None:
    """Find LangGraph's background saves of this run; return a check for a failed one.

    Private: ``CONFIG_KEY_CALL`` (``"__pregel_call"``, a partial whose ``schedule_task``
    keyword is bound to the run's loop) → ``.submit.__self__.tasks`` (its background
    executor's dict of save futures → ``(cancel_on_exit, reraise_on_exit)``). LangGraph
    saves a task's result (``put_writes``) in the background and re-raises a failed save
    only when the run ends; planexec needs to see it before starting the next step. None
    when the shape is not the expected one (then only the store probe guards).
    Public API to move to: none yet.
    """
    try:
        call = _configurable(config)[CONFIG_KEY_CALL]
        loop = call.keywords["schedule_task"].__self__
        background = loop.submit.__self__.tasks
    except (KeyError, AttributeError, TypeError):
        return None
    if not isinstance(background, dict):
        return None
    return FailedSaves(background)


class FailedSaves:
    """A check for a failed background save that looks at each save once, not at every call.

    Called before every step while hundreds of saves may be pending: each future is given a
    done callback when first seen (the newest first, up to one seen before: LangGraph's dict
    keeps insertion order), so a call costs only the saves submitted since the last one.
    """

    def __init__(self, background: dict[Any, Any]) -> None:
        """Watch LangGraph's dict of background save futures (and their flags)."""
        self._background = background
        self._watched: weakref.WeakSet[Any] = weakref.WeakSet()
        self._error: BaseException | None = None

    def __call__(self) -> BaseException | None:
        """Return the error of a save that failed (and is re-raised at the run's end), if any."""
        if self._error is not None:
            return self._error
        try:
            keys = list(self._background)  # a copy: other threads update it
        except RuntimeError:  # changed while copied: look again at the next step
            return None
        for fut in reversed(keys):
            try:
                if fut in self._watched:
                    break  # this one and every older one are watched already
                self._watched.add(fut)
            except TypeError:  # not weakly referenceable: look at it every time
                pass
            flags = self._background.get(fut)
            if isinstance(flags, tuple) and len(flags) == 2 and flags[1]:
                if fut.done():
                    self._record(fut)
                else:
                    fut.add_done_callback(self._record)
        return self._error

    def _record(self, fut: Any) -> None:
        if self._error is None and not fut.cancelled() and fut.exception() is not None:
            if isinstance(fut.exception(), GraphBubbleUp):  # a node's interrupt: not a save
                return
            self._error = fut.exception()
