"""Stream a run to its end, passing on step events and answering approval interrupts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from planexec.admission import PlanexecGraph
from planexec.context import Context
from planexec.runs.types import ApprovalRequest, Decide, OnEvent

STREAM = ["custom", "updates"]  # step events, and the updates that carry interrupts
Stopped = tuple[dict[str, Any], ApprovalRequest | None]
"""A run's values where it stopped, and the approval request it waits on (None at its end)."""


def resume_payload(answer: Mapping[str, Any] | None) -> Command[Any] | None:
    """Return the input that resumes a thread: the answer to its approval, or None."""
    return Command(resume=dict(answer)) if answer is not None else None


def take(chunk_mode: str, chunk: Any, on_event: OnEvent | None) -> ApprovalRequest | None:
    """Pass a step event on; return the approval request an update carries, if any."""
    if chunk_mode == "custom":
        if on_event is not None:
            on_event(chunk)
    elif "__interrupt__" in chunk:
        request: ApprovalRequest = chunk["__interrupt__"][0].value
        return request
    return None


def drive(
    graph: PlanexecGraph,
    config: RunnableConfig,
    context: Context,
    payload: Any,
    on_event: OnEvent | None,
    decide: Decide | None,
) -> Stopped:
    """Stream until the run ends, or stops at an approval when ``decide`` is None."""
    while True:
        pending = None
        for mode, chunk in graph.stream(payload, config, context=context, stream_mode=STREAM):
            pending = take(mode, chunk, on_event) or pending
        if pending is None or decide is None:
            return graph.get_state(config).values, pending
        payload = Command(resume=dict(decide(pending)))


async def adrive(
    graph: PlanexecGraph,
    config: RunnableConfig,
    context: Context,
    payload: Any,
    on_event: OnEvent | None,
    decide: Decide | None,
) -> Stopped:
    """Async :func:`drive`."""
    while True:
        pending = None
        async for mode, chunk in graph.astream(
            payload, config, context=context, stream_mode=STREAM
        ):
            pending = take(mode, chunk, on_event) or pending
        if pending is None or decide is None:
            return (await graph.aget_state(config)).values, pending
        payload = Command(resume=dict(decide(pending)))
