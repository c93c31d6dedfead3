"""Running one step: dependencies, references, the tool call, timeouts, retries, outputs.

A step waits for its dependencies, resolves references, calls its tool with a timeout and
retries, and keeps its output small in state (large outputs go to a file).

The executor node calls one durable LangGraph ``@task`` per step, up front and in plan
order, so a resumed run maps finished tasks back to the same steps; each task waits here
for the steps it depends on, so a step starts as soon as its own dependencies are done.

A task's arguments are its trace inputs and appear in the ``debug`` and ``tasks`` streams, so
a step task takes only its step (small JSON); what the steps of a round share (tools, context,
secrets to scrub) reaches them through :func:`current_round`, set by the executor node.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import json
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer
from pydantic import ValidationError

from planexec import models, prompts, scrubbed, toolcalls
from planexec.context import Context
from planexec.errors import ToolError, TransientToolError
from planexec.outputs import OutputStore, output_of
from planexec.plan import ReferenceError_, iter_references, resolve_references
from planexec.secrets import redact, secret_values
from planexec.state import OutputFile, PlanDoc, RefusedCall, RoleUsage, StepDoc, add_usage
from planexec.steptools import Refusals, allowed_tools
from planexec.storable import UnstorableValueError, storable_text, to_storable
from planexec.store_guard import CheckpointStoreError, StoreGuard
from planexec.toolcalls import (
    CallScope,
    StepTimeout,
    abandoned_of,
    call_scope,
    retries_timeouts,
    run_in_thread,
    within,
)
from planexec.tools.registry import ToolRegistry
from planexec.tools.workspace import Workspace, use_workspace
from planexec.transient import is_transient

MAX_RETRY_INTERVAL = 60.0
"""Longest wait, in seconds, before a step's next attempt, however the backoff is set."""
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
PREVIEW_CHARS = 200


class DependencyGate:
    """Outcomes of finished steps, awaitable from any event loop, published from any thread."""

    def __init__(self, known: dict[int, dict[str, Any]]) -> None:
        """Start with the outcomes of steps finished in earlier rounds."""
        self._outcomes = dict(known)
        self._lock = threading.Lock()
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}

    def publish(self, step_id: int, outcome: dict[str, Any]) -> None:
        """Record a step's outcome (the first one wins) and wake whoever waits for it."""
        with self._lock:
            if step_id in self._outcomes:
                return
            self._outcomes[step_id] = outcome
            waiters = self._waiters.pop(step_id, [])
        for fut in waiters:
            fut.get_loop().call_soon_threadsafe(_resolve, fut)

    async def wait_async(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        """Await every step in ``ids`` without holding a thread; return their outcomes."""
        loop = asyncio.get_running_loop()
        pending = []
        with self._lock:
            for i in ids:
                if i not in self._outcomes:
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiters.setdefault(i, []).append(fut)
                    pending.append(fut)
        if pending:
            await asyncio.gather(*pending)
        with self._lock:
            return {i: self._outcomes[i] for i in ids}


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass
class ExecutionRound:
    """Everything the step tasks of one executor run share."""

    plan: PlanDoc
    tools: ToolRegistry
    context: Context
    workspace: Workspace
    outputs: OutputStore
    run_id: str
    gate: DependencyGate
    secrets: list[str] = field(default_factory=secret_values)
    store: StoreGuard = field(default_factory=StoreGuard.disabled)
    _slots: asyncio.Semaphore | None = field(default=None, init=False)
    _steps_loop: StepLoop | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def slots(self) -> asyncio.Semaphore:
        """Return the limit on steps running at once (steps of a round share one event loop)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.context.max_parallel_steps))
        return self._slots

    def steps_loop(self) -> StepLoop:
        """Return the event loop thread that runs this round's steps for sync callers."""
        with self._lock:
            if self._steps_loop is None:
                self._steps_loop = StepLoop()
            return self._steps_loop

    def close(self) -> None:
        """Stop the sync callers' event loop thread, if one was started."""
        with self._lock:
            if self._steps_loop is not None:
                self._steps_loop.close()
                self._steps_loop = None


_ROUND: contextvars.ContextVar[ExecutionRound] = contextvars.ContextVar("planexec_round")


@contextlib.contextmanager
def running(round_: ExecutionRound) -> Iterator[None]:
    """Make ``round_`` the round of the step tasks called (and running) in this context."""
    token = _ROUND.set(round_)
    try:
        yield
    finally:
        _ROUND.reset(token)


def current_round() -> ExecutionRound:
    """Return the round of the running step task (set by the executor node with ``running``)."""
    try:
        return _ROUND.get()
    except LookupError:
        raise RuntimeError("a step task runs only inside the executor node") from None


def _secrets() -> list[str]:
    round_ = _ROUND.get(None)
    return round_.secrets if round_ is not None else secret_values()


class StepLoop:
    """An event loop in a daemon thread: sync step tasks hand their step to it and wait."""

    def __init__(self) -> None:
        """Start the loop's thread."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="planexec-steps"
        )
        self._thread.start()

    def run(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run a coroutine on the loop, in the caller's context (config, stream writer); block."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        ctx = contextvars.copy_context()

        def start() -> None:
            task = self.loop.create_task(make(), context=ctx)
            task.add_done_callback(lambda t: _copy_outcome(t, done))

        self.loop.call_soon_threadsafe(start)
        return done.result()

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


def _copy_outcome(task: asyncio.Task[Any], done: concurrent.futures.Future[Any]) -> None:
    if task.cancelled():
        done.cancel()
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())


def now() -> float:
    """Return the wall-clock time, in seconds since the epoch."""
    return time.time()


def outcome(
    step_id: int,
    status: str,
    *,
    attempts: int = 0,
    started_at: float | None = None,
    output: Any = None,
    output_file: OutputFile | None = None,
    summary: str = "",
    error: str | None = None,
    usage: dict[str, RoleUsage] | None = None,
    secrets: list[str] | None = None,
    refused_calls: list[RefusedCall] | None = None,
) -> dict[str, Any]:
    """Build the JSON record a step task returns (and the checkpoint keeps), secrets removed.

    ``output`` must already be storable (:func:`planexec.storable.to_storable`); the summary
    and the error, which quote tools and models, are made storable here. ``output_file`` is
    set only for a spilled output (see :mod:`planexec.outputs`).
    """
    record = {
        "id": step_id,
        "status": status,
        "attempts": attempts,
        "started_at": started_at,
        "ended_at": now() if status != "skipped" else None,
        "output": output,
        "summary": storable_text(redact(summary, secrets)),
        "error": None if error is None else storable_text(redact(error, secrets)),
        "usage": usage or {},
    }
    if output_file is not None:
        record["output_file"] = output_file
    if refused_calls:
        record["refused_calls"] = redact(refused_calls, secrets)
    return record


def retry_delay(context: Context, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (exponential, capped)."""
    try:
        delay = context.retry_initial_interval * context.retry_backoff_factor ** (attempt - 1)
    except OverflowError:
        return MAX_RETRY_INTERVAL
    return min(delay, MAX_RETRY_INTERVAL)


def summarize(output: Any, limit: int = 240) -> str:
    """Return a one-line preview of an output."""
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def store_output(value: Any, round_: ExecutionRound) -> tuple[Any, OutputFile | None]:
    """Keep a small output as is; spill a large one to planexec's outputs folder.

    Returns ``(output, None)`` for an output kept in state, ``(None, output_file)`` for a
    spilled one.
    """
    text = json.dumps(value, ensure_ascii=False)
    size = len(text.encode("utf-8"))
    if size > MAX_OUTPUT_BYTES:
        raise ToolError(f"the output is {size} bytes; at most {MAX_OUTPUT_BYTES} are kept")
    if size <= round_.context.inline_output_limit:
        return value, None
    preview = summarize(value, PREVIEW_CHARS)
    saved: OutputFile = await _in_daemon_thread(  # file I/O stays off the event loop
        lambda: round_.outputs.save(text, preview)
    )
    return None, saved


def summary_of(output: Any, output_file: OutputFile | None) -> str:
    """Return a step's one-line summary, from its output or its spilled output's preview."""
    if output_file is None:
        return summarize(output)
    return f"{output_file['preview']} ({output_file['bytes']:,} bytes, kept in a file)"


async def _in_daemon_thread(fn: Callable[[], Any]) -> Any:
    """Run a blocking call in a daemon thread and await it; a hung call is abandoned, not joined."""
    return await run_in_thread(fn)


class ToolFailed(ToolError):
    """A tool's failure as planexec reports it: the scrubbed description of what it raised."""


class TransientToolFailed(ToolFailed, TransientToolError):
    """A tool's failure that may pass on its own (it raised a transient error): retried."""


async def call_tool(tool_: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """Invoke a tool; return its result as JSON data with every secret replaced.

    The real call runs quietly in its own thread (async tools on their own loop, see
    :mod:`planexec.toolcalls`): callbacks and traces, if there are any, see a stand-in run
    (``config`` names and tags it) with scrubbed arguments and result, and what the tool writes
    to the stream is scrubbed. A failure is raised as :class:`ToolFailed` (or
    :class:`TransientToolFailed`) with a scrubbed message.
    """
    secrets = _secrets()

    async def work() -> Any:
        problem: tuple[str, bool] | None = None
        with scrubbed.quiet():
            quiet = scrubbed.quiet_config(secrets)
            try:
                value = await toolcalls.call_tool(tool_, args, quiet)
                return redact(to_storable(value), secrets)
            except Exception as exc:  # noqa: BLE001 - reported as a scrubbed ToolFailed
                problem = (redact(_describe_error(exc), secrets), is_transient(exc))
        message, transient = problem  # raised here, outside the handler: no chained original
        raise (TransientToolFailed if transient else ToolFailed)(message)

    if not scrubbed.observed(config):  # no tracer or stream handler: no stand-in run needed
        return await work()
    return await scrubbed.ToolRun.of(tool_, work).ainvoke(redact(args, secrets), config)


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, StepTimeout):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, UnstorableValueError):
        return f"the output cannot be stored: {exc}"
    if isinstance(exc, ValidationError):
        return "invalid arguments: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, ToolError) else text


async def _model_step(
    step: StepDoc,
    args: dict[str, Any],
    inputs: dict[int, Any],
    round_: ExecutionRound,
    config: RunnableConfig,
    usage: dict[str, RoleUsage],
    refusals: Refusals,
) -> str:
    """Carry out a tool-less step with the executor model and its step's tools (bounded loop)."""
    allowed = allowed_tools(step, round_.tools)
    model = await _in_daemon_thread(lambda: models.load_chat_model(round_.context.executor_model))
    bound = model.bind_tools(list(allowed.values())) if allowed else model
    shown_inputs = (
        "\n".join(f"- step {i}: {summarize(v, 4000)}" for i, v in inputs.items()) or "(none)"
    )
    messages: list[BaseMessage] = [
        SystemMessage(prompts.EXECUTOR_SYSTEM),
        HumanMessage(
            prompts.EXECUTOR_STEP.format(
                goal=round_.plan["goal"],
                id=step["id"],
                description=step["description"],
                expected_output=step["expected_output"] or "(not stated)",
                args=json.dumps(args, default=str)[:8000],
                inputs=shown_inputs,
            )
        ),
    ]
    for _ in range(round_.context.max_executor_turns):
        reply = await bound.ainvoke(messages, config)
        usage.update(add_usage(usage, models.usage_of("executor", reply)))
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            content = reply.content
            return content if isinstance(content, str) else json.dumps(content, default=str)
        messages.append(reply)
        for call in reply.tool_calls:
            if call["name"] not in allowed:
                text = refusals.refuse(call["name"], call["args"], list(allowed))
            else:
                try:
                    result = await asyncio.wait_for(
                        call_tool(allowed[call["name"]], call["args"], config),
                        round_.context.step_timeout,
                    )
                    text = json.dumps(to_storable(result), ensure_ascii=False)[:20_000]
                except Exception as exc:  # noqa: BLE001 - reported back to the model
                    text = f"error: {_describe_error(exc)}"
            messages.append(ToolMessage(text, tool_call_id=call["id"]))
    raise ToolError(f"no answer after {round_.context.max_executor_turns} model turns")


async def execute_step(
    step: StepDoc, deps: dict[int, dict[str, Any]], round_: ExecutionRound
) -> dict[str, Any]:
    """Run one step whose dependencies have all finished.

    A step's failure is its outcome; the only exception is :class:`CheckpointStoreError`,
    raised before an attempt starts once the checkpoint store has failed.
    """
    sid = step["id"]
    raw_write = get_stream_writer()

    def write(event: dict[str, Any]) -> None:
        raw_write(redact(event, round_.secrets))

    broken = [d for d in step["depends_on"] if deps[d]["status"] != "succeeded"]
    if broken:
        reason = ", ".join(f"step {d} {deps[d]['status']}" for d in broken)
        write({"event": "step_skipped", "step": sid, "reason": reason})
        return outcome(sid, "skipped", error=f"skipped because {reason}", secrets=round_.secrets)

    await round_.store.check()  # a step is not even announced once checkpoint writes fail
    started = now()
    write({"event": "step_started", "step": sid, "tool": step["tool"], "at": started})
    usage: dict[str, RoleUsage] = {}
    refusals = Refusals(sid, write, round_.secrets)
    try:
        referenced = {ref for ref, _ in iter_references(step["args"])} | set(step["depends_on"])
        needed = {d: deps[d] for d in sorted(referenced & set(deps))}
        inputs: dict[int, Any] = {d: rec.get("output") for d, rec in needed.items()}
        if any(rec.get("output_file") is not None for rec in needed.values()):
            inputs = await _in_daemon_thread(  # read spilled outputs off the event loop
                lambda: {d: output_of(rec, round_.outputs) for d, rec in needed.items()}
            )
        args = resolve_references(step["args"], inputs)
    except (ReferenceError_, ToolError, OSError, ValueError) as exc:
        error = storable_text(f"cannot resolve arguments: {exc}")
        write({"event": "step_failed", "step": sid, "error": error})
        return outcome(sid, "failed", started_at=started, error=error, secrets=round_.secrets)

    config: RunnableConfig = {
        "run_name": f"step {sid}: {step['tool'] or 'executor model'}",
        "tags": [f"planexec:step:{sid}", f"planexec:thread:{round_.run_id}"],
        "metadata": {"planexec_step": sid, "planexec_plan_version": round_.plan["version"]},
    }
    ctx = round_.context
    max_attempts = max(1, ctx.step_max_attempts)
    tool_: BaseTool | None = None
    scope = CallScope(round_.run_id, sid, max(1, ctx.max_abandoned_calls))
    attempts, error = 0, "not run"
    while attempts < max_attempts:
        attempts += 1
        refusals.attempt = attempts
        try:
            async with round_.slots():  # at most max_parallel_steps attempts at once
                await round_.store.check()  # no attempt starts once checkpoint writes fail
                with use_workspace(round_.workspace), call_scope(scope):
                    if step["tool"] is None:
                        work = _model_step(step, args, inputs, round_, config, usage, refusals)
                    else:
                        tool_ = round_.tools.get(step["tool"])
                        work = call_tool(tool_, args, config)
                    value = await within(work, ctx.step_timeout)  # ends at the limit, always
                output, output_file = await store_output(
                    redact(to_storable(value), round_.secrets), round_
                )
        except CheckpointStoreError:
            raise  # the step did not start; the executor node stops the run
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the step's, not the run's
            error = _describe_error(exc)
            if isinstance(exc, StepTimeout) and abandoned_of(round_.run_id, sid):
                error += " (the call did not stop: abandoned, still running)"
            error = storable_text(error)
            transient = (
                retries_timeouts(tool_)  # a local timeout is retried only if the tool says so
                if isinstance(exc, StepTimeout)
                else is_transient(exc)
            )
            if transient and attempts < max_attempts:
                write({"event": "step_retry", "step": sid, "attempt": attempts, "error": error})
                await asyncio.sleep(retry_delay(ctx, attempts))  # backoff outside the slot
                continue
        else:
            summary = summary_of(output, output_file)
            write({"event": "step_finished", "step": sid, "summary": summary, "at": now()})
            return outcome(
                sid,
                "succeeded",
                attempts=attempts,
                started_at=started,
                output=output,
                output_file=output_file,
                summary=summary,
                usage=usage,
                secrets=round_.secrets,
                refused_calls=refusals.kept,
            )
        break
    write({"event": "step_failed", "step": sid, "error": error})
    return outcome(
        sid,
        "failed",
        attempts=attempts,
        started_at=started,
        error=error,
        usage=usage,
        secrets=round_.secrets,
        refused_calls=refusals.kept,
    )


def run_step_blocking(step: StepDoc) -> dict[str, Any]:
    """Body of the sync step task: run the async step on the round's loop thread and wait."""
    round_ = current_round()
    result: dict[str, Any] = round_.steps_loop().run(lambda: run_step_async(step))
    return result


async def run_step_async(step: StepDoc) -> dict[str, Any]:
    """Body of the async step task: await dependencies on the loop, then run the step.

    Raises :class:`CheckpointStoreError`, recording nothing, once the store has failed.
    """
    round_ = current_round()
    deps = await round_.gate.wait_async(step["depends_on"])
    round_.store.raise_if_failed()  # neither run nor skipped: its record could not be kept
    result = await execute_step(step, deps, round_)
    round_.gate.publish(step["id"], result)  # dependents start now, not after the task commits
    return result
