"""Abandoned tool calls: still running after their caller gave up, counted and bounded.

Threads cannot be killed, so a timed-out call may go on. Such a call is counted process-wide
(:func:`abandoned_calls`) until it really ends, and bounded (:func:`refusal`): a step never
starts a call of a tool while an earlier call of the same step and tool is still running, and no
call starts while ``max_abandoned_calls`` abandoned calls run in the process.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypedDict

DEFAULT_MAX_ABANDONED = 4
"""Bound on abandoned calls for calls made outside a step (see ``Context.max_abandoned_calls``)."""


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


def current_scope() -> CallScope:
    """Return the scope of the calls made here (outside a step: no step, the default bound)."""
    return _SCOPE.get() or CallScope(None, None, DEFAULT_MAX_ABANDONED)


_LOCK = threading.Lock()
_RUNNING: dict[int, AbandonedCall] = {}
"""Abandoned calls of this process that are still running, by the id of their call."""


def add(key: int, entry: AbandonedCall) -> None:
    """Count a call as abandoned until :func:`remove` says it ended."""
    with _LOCK:
        _RUNNING[key] = entry


def remove(key: int) -> None:
    """Stop counting a call: it has ended."""
    with _LOCK:
        _RUNNING.pop(key, None)


def abandoned_calls() -> list[AbandonedCall]:
    """Return the tool calls of this process that timed out and are still running."""
    with _LOCK:
        return [AbandonedCall(**entry) for entry in _RUNNING.values()]


def abandoned_of(thread_id: str | None, step: int | None) -> list[AbandonedCall]:
    """Return the abandoned calls of one step of one thread that are still running."""
    return [c for c in abandoned_calls() if c["thread_id"] == thread_id and c["step"] == step]


def refusal(scope: CallScope, name: str, *, read_only: bool = False) -> str | None:
    """Say why no call of ``name`` may start now (the step's earlier call runs on, or too many).

    A ``read_only`` tool (declared free of side effects) may run again while the step's earlier
    call runs on: twice at once changes nothing (e.g. a step that ran while its plan awaited
    approval, stopped when the answer came, and now runs for the approved plan).
    """
    running = abandoned_calls()
    own = [  # the same step's call of the same tool (a new task's step 1 is another step)
        c
        for c in running
        if c["thread_id"] == scope.thread_id and c["step"] == scope.step and c["tool"] == name
    ]
    if scope.step is not None and own and not read_only:
        since = time.time() - own[0]["abandoned_at"]
        return (
            f"not started: an earlier call of this step ({own[0]['tool']}) was given up on (it "
            f"timed out, or its run was stopped) and is still running ({since:.1f} s after it "
            "was abandoned); a step never runs twice at once"
        )
    if len(running) >= scope.max_abandoned:
        return (
            f"not started: {len(running)} tool calls given up on are still running in this "
            f"process (max_abandoned_calls is {scope.max_abandoned}); {name} starts once fewer run"
        )
    return None
