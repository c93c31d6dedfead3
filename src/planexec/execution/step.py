"""One step, top to bottom: resolve its references, attempt it (time limit, retries), record it.

A step whose dependency did not succeed is skipped. Otherwise its ``$N`` references are resolved
from its dependencies' outputs, and each attempt calls its tool (or runs its model step,
:mod:`planexec.execution.model_step`) in one of the round's slots, within ``step_timeout``; a
transient failure is retried with capped exponential backoff. A step's failure is its outcome.
Every change of a step's state is streamed as an event (secrets redacted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from planexec.concurrency.abandoned import CallScope, abandoned_of, call_scope
from planexec.concurrency.offloop import run_in_thread
from planexec.concurrency.toolcalls import StepTimeout, with_time_limit
from planexec.errors import ToolError
from planexec.execution.calls import call_tool, describe_error
from planexec.execution.model_step import model_step
from planexec.execution.outcomes import now, outcome
from planexec.execution.retries import extra_attempts, retry_delay, retryable
from planexec.execution.round import ExecutionRound
from planexec.execution.steptools import Refusals
from planexec.llm.usage import UsageCounter
from planexec.plan.references import UnresolvedReferenceError, iter_references, resolve_references
from planexec.recording.replayed import track_replayed
from planexec.redaction.secrets import redact
from planexec.spending.budget import BudgetExhausted, describe_stop
from planexec.state import OutputFile, StepDoc, StepOutcome
from planexec.storage.outputs import keep_output, output_of, summary_of
from planexec.storage.storable import storable_text, to_storable
from planexec.storage.store_guard import CheckpointStoreError
from planexec.tools.workspace import use_workspace

Write = Callable[[dict[str, Any]], None]


async def execute_step(
    step: StepDoc, deps: dict[int, StepOutcome], round_: ExecutionRound
) -> StepOutcome:
    """Run one step whose dependencies have all finished; return its outcome.

    A step's failure is its outcome; the only exception is :class:`CheckpointStoreError`,
    raised before an attempt starts once the checkpoint store has failed.
    """
    sid, secrets, raw_write = step["id"], round_.secrets, get_stream_writer()

    def write(event: dict[str, Any]) -> None:
        if round_.speculative:  # not a step of an approved plan: a watcher must tell them apart
            event = {**event, "event": f"speculative_{event['event']}"}
        raw_write(redact(event, secrets))

    await round_.store.check()  # neither run, skipped nor announced once checkpoint writes fail
    broken = [d for d in step["depends_on"] if not _usable(d, deps[d], step, round_)]
    if broken:
        reason = ", ".join(f"step {d} {deps[d]['status']}" for d in broken)
        write({"event": "step_skipped", "step": sid, "reason": reason})
        return outcome(sid, "skipped", error=f"skipped because {reason}", secrets=secrets)

    if (spent := _spent_budget(round_)) is not None:  # no step starts once a budget is spent
        write({"event": "step_skipped", "step": sid, "reason": spent})
        return outcome(sid, "skipped", error=f"not started: {spent}", secrets=secrets)
    if round_.halted is not None and (why := round_.halted()) is not None:
        write({"event": "step_skipped", "step": sid, "reason": why})
        return outcome(sid, "skipped", error=f"not started: {why}", secrets=secrets)
    started = now()
    write({"event": "step_started", "step": sid, "tool": step["tool"], "at": started})
    try:
        args, inputs = await _resolve(step, deps, round_)
    except (UnresolvedReferenceError, ToolError, OSError, ValueError) as exc:
        error = storable_text(f"cannot resolve arguments: {exc}")
        write({"event": "step_failed", "step": sid, "error": error})
        return outcome(sid, "failed", started_at=started, error=error, secrets=secrets)
    return await _attempts(step, args, inputs, round_, started, write)


def _usable(dep: int, done: StepOutcome, step: StepDoc, round_: ExecutionRound) -> bool:
    """Say whether ``step`` may run after dependency ``dep`` ended as it did.

    A dependency that succeeded is usable; one that failed with ``on_failure: "skip"`` is too,
    unless the step uses its output (a ``$dep`` reference).
    """
    if done["status"] == "succeeded":
        return True
    if done["status"] != "failed" or dep not in round_.skippable:
        return False
    return all(ref != dep for ref, _ in iter_references(step["args"]))


def _spent_budget(round_: ExecutionRound) -> str | None:
    """Say which budget of the run is spent (None while every budget has room)."""
    stop = round_.budget.stop() if round_.budget is not None else None
    return describe_stop(stop) if stop is not None else None


async def _resolve(
    step: StepDoc, deps: dict[int, StepOutcome], round_: ExecutionRound
) -> tuple[dict[str, Any], dict[int, Any]]:
    """Return the step's arguments with references resolved, and its dependencies' outputs."""
    referenced = {ref for ref, _ in iter_references(step["args"])}
    referenced |= set(step["depends_on"])
    needed = {d: deps[d] for d in sorted(referenced & set(deps))}
    inputs: dict[int, Any] = {d: rec.get("output") for d, rec in needed.items()}
    if any(rec.get("output_file") is not None for rec in needed.values()):
        inputs = await run_in_thread(  # read spilled outputs off the event loop
            lambda: {d: output_of(rec, round_.outputs) for d, rec in needed.items()}
        )
    return resolve_references(step["args"], inputs), inputs


async def _attempts(
    step: StepDoc,
    args: dict[str, Any],
    inputs: dict[int, Any],
    round_: ExecutionRound,
    started: float,
    write: Write,
) -> StepOutcome:
    """Attempt the step until it succeeds, fails for good, or runs out of attempts."""
    sid, ctx = step["id"], round_.context
    max_attempts = max(1, ctx.step_max_attempts, 1 + extra_attempts(step))
    counter = UsageCounter("executor")  # every attempt's model calls count, failed ones too
    refusals = Refusals(sid, write, round_.secrets)
    replayed = track_replayed()  # its calls served from a recording mark it (planexec.recording)
    ended = partial(  # what both endings record
        outcome,
        sid,
        started_at=started,
        secrets=round_.secrets,
        refused_calls=refusals.kept,
        replayed=replayed,
    )
    attempts, error = 0, "not run"
    while attempts < max_attempts:
        attempts += 1
        refusals.attempt = attempts
        try:
            output, output_file = await _attempt(step, args, inputs, round_, counter, refusals)
        except CheckpointStoreError:
            raise  # the step did not start; the executor node stops the run
        except BudgetExhausted as exc:  # raised before the attempt starts (or a model call)
            if attempts == 1 and not counter.usage():
                write({"event": "step_skipped", "step": sid, "reason": str(exc)})
                return ended("skipped", attempts=0, error=f"not started: {exc}")
            error = storable_text(f"stopped: {exc}")
            break
        except Exception as exc:  # a tool's failure is the step's, not the run's
            error = describe_error(exc)
            if isinstance(exc, StepTimeout) and abandoned_of(round_.run_id, sid):
                error += " (the call did not stop: abandoned, still running)"
            error = storable_text(error)
            transient = retryable(exc, step, round_.tools)
            if attempts < (max_attempts if transient else 1 + extra_attempts(step)):
                write({"event": "step_retry", "step": sid, "attempt": attempts, "error": error})
                await asyncio.sleep(retry_delay(ctx, attempts))  # backoff outside the slot
                continue
            break
        summary = summary_of(output, output_file)
        write({"event": "step_finished", "step": sid, "summary": summary, "at": now()})
        return ended(
            "succeeded",
            attempts=attempts,
            output=output,
            output_file=output_file,
            summary=summary,
            usage=counter.usage(),
        )
    write({"event": "step_failed", "step": sid, "error": error})
    return ended("failed", attempts=attempts, error=error, usage=counter.usage())


async def _attempt(
    step: StepDoc,
    args: dict[str, Any],
    inputs: dict[int, Any],
    round_: ExecutionRound,
    counter: UsageCounter,
    refusals: Refusals,
) -> tuple[Any, OutputFile | None]:
    """Make one attempt in a slot, in the run's workspace, ended at the step's time limit.

    Returns the output as kept in state and, for a spilled output, its file.
    """
    sid, ctx = step["id"], round_.context
    config: RunnableConfig = {
        "run_name": f"step {sid}: {step['tool'] or 'executor model'}",
        "tags": [f"planexec:step:{sid}"],  # LangGraph's metadata already names the thread
        "metadata": {"planexec_step": sid, "planexec_plan_version": round_.plan["version"]},
    }
    async with round_.slots.hold(sid):  # at most max_parallel_steps, longest chain first
        await round_.store.check()  # no attempt starts once checkpoint writes fail
        if round_.budget is not None:
            round_.budget.check()  # nor once a budget of the run is spent
        scope = CallScope(round_.run_id, sid, max(1, ctx.max_abandoned_calls))
        with use_workspace(round_.workspace), call_scope(scope):
            if step["tool"] is None:
                work = model_step(step, args, inputs, round_, config, counter, refusals)
            else:
                work = call_tool(round_.tools.get(step["tool"]), args, config, round_.secrets)
            value = await with_time_limit(work, ctx.step_timeout)  # ends at the limit, always
        if step["tool"] is None:  # a tool's result comes back storable and scrubbed already
            value = redact(to_storable(value), round_.secrets)
        return await keep_output(value, round_.outputs, ctx.inline_output_limit)
