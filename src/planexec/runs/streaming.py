"""Stream a run to its end, passing on step events and answering approval interrupts.

While a request waits, a run may go on (speculation: its read-only steps run beside the
question, :mod:`planexec.nodes.speculator`). :func:`adrive` then asks ``decide`` at once, in a
thread of its own, while the stream's events keep arriving. An answer given before the stream
ends says so (:func:`planexec.execution.answers.stop_speculating`: no new early step starts,
those under way finish and are kept, so the stream ends soon and nothing runs twice); a cancel or
a reject closes the stream at once instead (:func:`stops_the_run`). Then the run resumes with the
answer. The sync :func:`drive` gets the request only when LangGraph's sync stream ends the
superstep, so it asks once the speculation has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from planexec.admission import PlanexecGraph
from planexec.context import Context
from planexec.execution.answers import stop_speculating
from planexec.review.request import ApprovalRequest, SpeculatedResult, SpeculationView
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
        self.answer: Mapping[str, Any] | None = None  # given while the run went on
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
        answer = self.answer if self.answer is not None else self.decide(self.pending)
        self.payload = Command(resume=dict(answer))
        self.pending, self.answer = None, None
        return True

    def asks_while_running(self) -> bool:
        """Say whether to ask ``decide`` now, while the stream goes on (and not at its end).

        So it is for a plan whose read-only steps run while it is asked about (its request's
        ``speculation``): the reviewer reads while they run.
        """
        return (
            self.decide is not None
            and self.pending is not None
            and self.pending["type"] == "plan_approval"
            and "speculation" in self.pending
        )


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
        if run.pending is not None and "speculation" in run.pending:  # ended: results are in
            run.pending = with_results(run.pending, graph.get_state(config).values)
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
        await _astream(graph, context, run)
    return (await graph.aget_state(config)).values, run.pending


async def _astream(graph: PlanexecGraph, context: Context, run: Driven) -> None:
    """Stream the run once; a request asked while the run goes on is answered meanwhile.

    ``decide`` is asked in a thread as soon as such a request arrives (the stream's events keep
    coming). Once it answers, the speculation starts no new step and the stream is read to its
    end (the steps under way finish), or closed at once for a cancel or a reject
    (:func:`stops_the_run`).
    The answer is kept for the next stream (:meth:`Driven.stream_again`).
    """
    answered: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
    asking = False

    def took(mode: str, chunk: Any) -> None:
        nonlocal asking
        run.take(mode, chunk)
        decide, request = run.decide, run.pending
        if not asking and decide and request and run.asks_while_running():
            asking = True
            answer_in_thread(decide, request, answered)

    parts = graph.astream(run.payload, run.config, context=context, stream_mode=STREAM)
    reading: asyncio.Future[Any] = asyncio.ensure_future(_read(parts, took))
    try:
        await asyncio.wait([reading, answered], return_when=asyncio.FIRST_COMPLETED)
        if not reading.done() and run.pending is not None:  # answered while the run goes on
            stop_speculating(thread_of(run.config), run.pending.get("digest"))
        if not reading.done() and stops_the_run(answered):
            reading.cancel()  # closes the stream: the run's work stops
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        else:
            await reading  # to its end (or its failure)
        if asking:
            run.answer = await answered
    finally:
        reading.cancel()
        answered.cancel()


def with_results(request: ReviewRequest, values: Mapping[str, Any]) -> ReviewRequest:
    """Return ``request`` showing the results its early steps have in the thread's state.

    The request is made as the question is asked, before its read-only steps end; asked once
    the run has stopped (a sync run), the reviewer gets their results too, not approved.
    """
    if request["type"] != "plan_approval" or "speculation" not in request:
        return request
    view = request["speculation"]
    shown = dict(view["results"])
    for sid, found in (values.get("speculated") or {}).items():
        record = found.get("record") or {}
        if int(sid) not in view["steps"] or found.get("version") != request["version"]:
            continue
        status, summary = str(record.get("status")), str(record.get("summary", ""))
        result = SpeculatedResult(status=status, summary=summary, approved=False)
        if record.get("error"):
            result["error"] = str(record["error"])
        shown[sid] = result
    refreshed = ApprovalRequest(**request)
    refreshed["speculation"] = SpeculationView(steps=view["steps"], results=shown)
    return refreshed


def stops_the_run(answered: asyncio.Future[Mapping[str, Any]]) -> bool:
    """Say whether an answer given while the run goes on stops it at once (closes its stream).

    A cancel or a reject does (nothing of the speculation will be used), and so does a failure
    to answer (nobody answered: the run waits). An approval or an edit does not: the steps
    under way finish instead, and the approved plan keeps each unchanged one (a stopped one
    would run again).
    """
    if not answered.done() or answered.cancelled() or answered.exception() is not None:
        return answered.done()
    return answered.result().get("action") in ("cancel", "reject")


def thread_of(config: RunnableConfig) -> str:
    """Return the thread id of a run's config."""
    return str((config.get("configurable") or {}).get("thread_id"))


async def _read(parts: AsyncIterator[Any], took: Callable[[str, Any], None]) -> None:
    """Read a stream to its end, passing on each part; cancelled, it closes the stream."""
    try:
        async for mode, chunk in parts:
            took(mode, chunk)
    finally:
        await parts.aclose()  # type: ignore[attr-defined]  # an async generator


DECIDE_THREAD = "planexec-decide"
"""The name of the thread :func:`answer_in_thread` asks ``decide`` in."""


def answer_in_thread(
    decide: Decide, request: ReviewRequest, answered: asyncio.Future[Mapping[str, Any]]
) -> None:
    """Ask ``decide`` in a thread of its own; its answer (or failure) settles ``answered``.

    A daemon thread, not the loop's executor: a prompt nobody answers (the run was stopped
    by Ctrl-C) must not keep the process from exiting.
    """
    loop, context = asyncio.get_running_loop(), contextvars.copy_context()

    def settle(answer: Mapping[str, Any] | None, failure: BaseException | None) -> None:
        if answered.done():  # nobody waits any more (the run stopped)
            return
        if failure is not None:
            answered.set_exception(failure)
        else:
            answered.set_result(answer or {})

    def ask() -> None:
        try:
            answer: Mapping[str, Any] = context.run(decide, request)
        except BaseException as exc:  # handed to the waiting run
            failure: BaseException | None = exc
            answer = {}
        else:
            failure = None
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            loop.call_soon_threadsafe(settle, answer, failure)

    threading.Thread(target=ask, name=DECIDE_THREAD, daemon=True).start()


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
