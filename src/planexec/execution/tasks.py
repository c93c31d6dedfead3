"""The bodies of the durable step task, and what the executor node does with their futures.

A task waits at the round's gate for its dependencies, runs its step and publishes the outcome
at once, so dependents start before the task's result is committed. On replay a finished task's
result comes back from the checkpoint without its body running: :func:`publisher` publishes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from planexec.concurrency import background
from planexec.execution.outcomes import outcome, ran_digest
from planexec.execution.round import ExecutionRound, current_round
from planexec.execution.scheduling import DependencyGate
from planexec.execution.step import execute_step
from planexec.state import StepDoc, StepOutcome
from planexec.storage.store_guard import CheckpointStoreError

StepFuture = Future[Any] | asyncio.Future[Any]


async def run_step_async(step: StepDoc) -> StepOutcome:
    """Body of the async step task: await dependencies on the loop, then run the step.

    Raises :class:`CheckpointStoreError`, recording nothing, once the store has failed.
    """
    round_ = current_round()
    if round_.stopped:  # the run was stopped before this task's turn came
        raise asyncio.CancelledError
    this = asyncio.current_task()
    if this is not None:
        round_.running_steps.add(this)
    try:
        deps = await round_.gate.wait_async(step["depends_on"])
        result = await execute_step(step, deps, round_)  # checks the store first
    finally:
        round_.running_steps.discard(this)
        round_.slots.forget(step["id"])  # a slot kept for a step that did not take it
    result["ran"] = ran_digest(step)
    round_.gate.publish(step["id"], result)  # dependents start now, not after the task commits
    return result


def run_step_blocking(step: StepDoc) -> StepOutcome:
    """Body of the sync step task (LangGraph's thread): the async step on the background loop."""
    return background.run_blocking(lambda: run_step_async(step))


async def all_ended(futures: Sequence[StepFuture], round_: ExecutionRound) -> None:
    """Wait until every step task's future has ended, however it ended.

    A sync run's futures are thread futures (LangGraph runs its tasks on threads): they wake
    this loop once, when the last one ends, not once each. If the wait is cancelled (the run
    was stopped), so is every step of the round under way (:meth:`ExecutionRound.cancel_steps`).
    """
    try:
        await _all_ended(futures)
    except asyncio.CancelledError:
        round_.cancel_steps()
        raise


async def _all_ended(futures: Sequence[StepFuture]) -> None:
    threads = [f for f in futures if isinstance(f, Future)]
    if threads:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        left = len(threads)
        lock = threading.Lock()

        def one_ended(_: Future[Any]) -> None:
            nonlocal left
            with lock:
                left -= 1
                last = left == 0
            if last:
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    loop.call_soon_threadsafe(_settle, ended)

        for fut in threads:
            fut.add_done_callback(one_ended)
        await ended
    on_loop = [f for f in futures if not isinstance(f, Future)]
    if on_loop:
        await asyncio.gather(*on_loop, return_exceptions=True)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def publisher(gate: DependencyGate, step: StepDoc) -> Callable[[StepFuture], None]:
    """Return a callback that publishes a task's outcome when its future resolves.

    A live task publishes from its own body (so an outcome is published once); this callback
    publishes a replayed task's, whose body did not run. It must never raise (a callback's
    exception is swallowed and dependents would wait forever): any problem becomes a failed
    outcome, and the node raises it after every task has ended.
    """

    def publish(fut: StepFuture) -> None:
        if fut.cancelled():  # the run is being cancelled (Ctrl-C, a cancelled run): no outcome
            return
        if gate.has(step["id"]):  # its body published it
            return
        try:
            result = result_of(fut, step)
        except Exception as exc:  # re-raised by the node, see above
            result = outcome(step["id"], "failed", error=f"internal error: {exc}")
        gate.publish(step["id"], result)

    return publish


def result_of(fut: StepFuture, step: StepDoc) -> StepOutcome:
    """Return a finished task's outcome (a crash is a failed one); refuse another step's."""
    exc = fut.exception()
    if exc is not None:
        return outcome(step["id"], "failed", error=f"internal error: {exc!r}")
    result: StepOutcome = fut.result()
    if result.get("id") != step["id"]:
        raise RuntimeError(
            f"replayed result of step {result.get('id')} came back for step {step['id']}"
        )
    ran = result.get("ran")  # results saved before steps were checked have none
    if ran is not None and ran != ran_digest(step):
        earlier = result.get("error") or result.get("summary") or ""
        return outcome(
            step["id"],
            "failed",
            error=f"before this run was resumed, another step {step['id']} ran in its place "
            f"(the plan was written again after a crash while it streamed; that step "
            f"{result.get('status')}: {earlier}): its result is not this step's, and this "
            "step did not run",
        )
    return result


def round_outcomes(
    round_: ExecutionRound, to_run: list[StepDoc], futures: Sequence[StepFuture]
) -> list[StepOutcome]:
    """Return the outcomes of a finished round in plan order, unless the store failed.

    A store failure is raised as :class:`CheckpointStoreError` (instead of returning the
    round's records): the thread stays at its last saved checkpoint, and a resume re-runs
    exactly the steps whose results were not saved.
    """
    failure = round_.store.failure
    if failure is None:
        return [result_of(f, s) for s, f in zip(to_run, futures, strict=True)]
    finished: list[str] = []
    not_started: list[str] = []
    for step, fut in zip(to_run, futures, strict=True):
        ended = fut.done() and not fut.cancelled() and fut.exception() is None
        (finished if ended else not_started).append(str(step["id"]))
    raise CheckpointStoreError(
        f"{failure}, so no step was started after that"
        + (f" (not started: {', '.join(not_started)})" if not_started else "")
        + ". Resume the thread when the store is back: steps whose results were saved are not"
        " run again"
        + (
            f"; steps that ended during this round ({', '.join(finished)}) run again if their "
            "results were not saved"
            if finished
            else ""
        )
        + "."
    ) from None
