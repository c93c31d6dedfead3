"""Stream a run to its end, passing on step events and answering approval interrupts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from planexec.admission import PlanexecGraph
from planexec.context import Context
from planexec.runs.db import RunError
from planexec.runs.types import Caller, Decide, OnEvent, ReviewRequest, StepEvent

STREAM = ["custom", "updates", "tasks"]  # step events; interrupts and plans; nodes at work
MAX_REFUSED = 3
"""Answers from ``decide`` refused in a row after which a run stops (the thread waits)."""
Stopped = tuple[dict[str, Any], ReviewRequest | None]
"""A run's values where it stopped, and the approval request it waits on (None at its end)."""


def resume_payload(answer: Mapping[str, Any] | None) -> Command[Any] | None:
    """Return the input that resumes a thread: the answer to its approval, or None."""
    return Command(resume=dict(answer)) if answer is not None else None


def take(chunk_mode: str, chunk: Any, on_event: OnEvent | None) -> ReviewRequest | None:
    """Pass events on; return the approval request an update carries, if any.

    Besides the graph's own step events, ``on_event`` sees ``node_started`` and
    ``node_finished`` (``node``: planner, replanner, evaluator, ...; ``failed``: the node
    raised or wrote an ``error``, so its work was not done), ``plan_changed``
    (``plan``, ``by``: the node that made it) and ``plan_approved`` (``by``: ``reviewer`` or
    ``policy``, once the approval accepted it; ``approver``: who, from its decision record), so
    a watcher can show who is at work and every plan version before it runs.
    """
    if chunk_mode == "updates" and "__interrupt__" in chunk:
        request: ReviewRequest = chunk["__interrupt__"][0].value
        return request
    if on_event is None:
        return None
    if chunk_mode == "custom":
        on_event(chunk)
    elif chunk_mode == "tasks":
        if "input" in chunk:
            on_event({"event": "node_started", "node": chunk["name"]})
        else:  # a node that raised, or ended the run with an error, did not do its work
            result = chunk.get("result")
            ended = isinstance(result, dict) and bool(result.get("error"))
            failed = chunk.get("error") is not None or ended
            on_event({"event": "node_finished", "node": chunk["name"], "failed": failed})
    else:
        for node, update in chunk.items():
            if isinstance(update, dict) and isinstance(update.get("plan"), dict):
                on_event({"event": "plan_changed", "by": node, "plan": update["plan"]})
            if isinstance(update, dict) and isinstance(update.get("approved"), dict):
                approved = update["approved"]
                event: StepEvent = {"event": "plan_approved", "by": str(approved.get("by"))}
                approver = approver_of(update.get("decisions"))
                on_event(event if approver is None else {**event, "approver": approver})
    return None


APPROVALS = {"approve", "edit"}
"""Actions of a decision record that approve a plan (an edit approves its new revision)."""


def approver_of(decisions: object) -> Caller | None:
    """Return who approved, from the decision records a node's update appends (None: none)."""
    records = decisions if isinstance(decisions, list) else []
    for record in reversed(records):
        if not isinstance(record, dict) or record.get("action") not in APPROVALS:
            continue
        by = record.get("by")
        if isinstance(by, dict):
            return {"id": by.get("id"), "source": by.get("source", "unknown")}
    return None


class Driven:
    """One driven run between its streams: what to send next, and where it stopped.

    The run's logic, for :func:`drive` and :func:`adrive` alike: they only stream.
    """

    def __init__(
        self,
        config: RunnableConfig,
        payload: Any,
        on_event: OnEvent | None,
        decide: Decide | None,
    ) -> None:
        """Drive a run of ``config`` that starts (or resumes) with ``payload``."""
        self.config, self.payload, self.on_event, self.decide = config, payload, on_event, decide
        self.pending: ReviewRequest | None = None
        self.refused = 0
        self.streams = 0

    def take(self, mode: str, chunk: Any) -> None:
        """Take one streamed part: pass its events on, keep the approval request it carries."""
        self.pending = take(mode, chunk, self.on_event) or self.pending

    def stream_again(self) -> bool:
        """Say whether to stream (again): first, then with ``decide``'s answer to an approval.

        Raise :class:`RunError` after :data:`MAX_REFUSED` refused answers in a row.
        """
        self.streams += 1
        if self.streams == 1:
            return True
        if self.pending is None or self.decide is None:
            return False
        self.refused = check_refusals(self.refused, self.payload, self.pending, self.config)
        self.payload = Command(resume=dict(self.decide(self.pending)))
        self.pending = None
        return True


def drive(
    graph: PlanexecGraph,
    config: RunnableConfig,
    context: Context,
    payload: Any,
    on_event: OnEvent | None,
    decide: Decide | None,
) -> Stopped:
    """Stream until the run ends, or stops at an approval when ``decide`` is None.

    Raise :class:`RunError` after :data:`MAX_REFUSED` refused answers in a row.
    """
    run = Driven(config, payload, on_event, decide)
    while run.stream_again():
        for mode, chunk in graph.stream(run.payload, config, context=context, stream_mode=STREAM):
            run.take(mode, chunk)
    return graph.get_state(config).values, run.pending


async def adrive(
    graph: PlanexecGraph,
    config: RunnableConfig,
    context: Context,
    payload: Any,
    on_event: OnEvent | None,
    decide: Decide | None,
) -> Stopped:
    """Async :func:`drive`."""
    run = Driven(config, payload, on_event, decide)
    while run.stream_again():
        parts = graph.astream(run.payload, config, context=context, stream_mode=STREAM)
        async for mode, chunk in parts:
            run.take(mode, chunk)
    return (await graph.aget_state(config)).values, run.pending


def check_refusals(
    refused: int, payload: Any, pending: ReviewRequest, config: RunnableConfig
) -> int:
    """Count an answer the approval refused; stop the run at :data:`MAX_REFUSED` in a row."""
    if not (isinstance(payload, Command) and pending.get("error")):
        return 0
    refused += 1
    if refused >= MAX_REFUSED:
        thread_id = config.get("configurable", {}).get("thread_id")
        raise RunError(
            f"the approval refused {refused} answers in a row (last: {pending['error']}); "
            f"the thread waits at approval: answer it with `planexec resume {thread_id}`"
        )
    return refused
