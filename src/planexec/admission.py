"""Admission: what a caller sends is checked before LangGraph stores any of it.

LangGraph writes a run's input, a ``Command``'s resume value and ``update_state`` values to
the checkpoint before any node sees them; a value the checkpoint cannot store (an integer
beyond 64 bits, a NUL on PostgreSQL, a value nested hundreds of levels deep) would fail that
write, or the thread's next one. :class:`PlanexecGraph` is the compiled graph with one gate
in front of every way in (``invoke``/``stream`` and their async forms, which the LangGraph
server also uses, and ``update_state`` in all its forms): a value that cannot be stored is
refused with :class:`InvalidInputError` before anything is written, so the thread is left
exactly as it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateUpdate

from planexec.context import Context
from planexec.errors import PlanexecError
from planexec.state import InputState, OutputState, State
from planexec.storable import unstorable_reason
from planexec.thread_lock import ahold, hold

MAX_TASK_CHARS = 20_000


class InvalidInputError(PlanexecError, ValueError):
    """What a caller sent cannot be accepted; nothing was stored and the thread is unchanged."""


def check_input(value: Any) -> None:
    """Refuse a run's input (a task, or a ``Command``) that cannot be accepted as it is."""
    if value is None:
        return
    if isinstance(value, Command):
        if value.resume is None and value.update is None and not value.goto:
            raise InvalidInputError(
                "the Command carries nothing: resume with Command(resume=answer)"
            )
        if value.resume is not None:
            _check_storable(value.resume, "the resume answer")
        if value.update is not None:
            _check_storable(value.update, "the command's state update")
        return
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"a run starts from {{'task': '...'}}, not from a {type(value).__name__}"
        )
    task = value.get("task")
    if not isinstance(task, str) or not task.strip():
        raise InvalidInputError("a run needs a non-empty text 'task', e.g. {'task': 'Sum sales'}")
    if len(task) > MAX_TASK_CHARS:
        raise InvalidInputError(
            f"the task is {len(task):,} characters long; at most {MAX_TASK_CHARS:,} are accepted"
        )
    _check_storable(value, "the input")


def check_updates(supersteps: Sequence[Sequence[StateUpdate]]) -> None:
    """Refuse ``update_state`` values that cannot be stored."""
    for superstep in supersteps:
        for update in superstep:
            _check_storable(update[0], "the state update")


def _check_storable(value: Any, what: str) -> None:
    reason = unstorable_reason(value)
    if reason is not None:
        raise InvalidInputError(
            f"{what} cannot be stored: {reason}; nothing was changed, send it again without that"
        )


class PlanexecGraph(CompiledStateGraph[State, Context, InputState, OutputState]):
    """The compiled planexec graph, with :mod:`planexec.admission`'s gate on every way in."""

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Check the input, hold the thread, then stream the run (``invoke`` comes here)."""
        check_input(input)
        with hold(self, config):
            yield from super().stream(input, config, **kwargs)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Check the input, hold the thread, then stream the run (``ainvoke``, the server)."""
        check_input(input)
        async with ahold(self, config):
            async for part in super().astream(input, config, **kwargs):
                yield part

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """Check state edits (``update_state`` comes here), then apply them."""
        check_updates(supersteps)
        with hold(self, config):
            return super().bulk_update_state(config, supersteps)

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """Check state edits (``aupdate_state`` and the server's state edits), then apply."""
        check_updates(supersteps)
        async with ahold(self, config):
            return await super().abulk_update_state(config, supersteps)


def admit(compiled: CompiledStateGraph[State, Context, InputState, OutputState]) -> PlanexecGraph:
    """Return ``compiled`` as a :class:`PlanexecGraph` (same nodes, channels and settings)."""
    attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}
    return PlanexecGraph(**attrs)
