"""Running one step: dependencies, references, the tool call, timeouts, retries, outputs.

A step waits for its dependencies, resolves references, calls its tool with a timeout and
retries, and keeps its output small in state (large outputs go to a file).

The executor node calls one durable LangGraph ``@task`` per step, up front and in plan
order, so a resumed run maps finished tasks back to the same steps; each task waits here
for the steps it depends on, so a step starts as soon as its own dependencies are done.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import math
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer
from pydantic import BaseModel, ValidationError

from planexec import models, prompts, toolcalls
from planexec.context import Context
from planexec.errors import ToolError, TransientToolError
from planexec.plan import ReferenceError_, iter_references, resolve_references
from planexec.secrets import redact, secret_values
from planexec.state import PlanDoc, RoleUsage, StepDoc, add_usage
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

TRANSIENT = (TransientToolError, TimeoutError, ConnectionError)
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
REF_KEY = "$ref"


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
    run_id: str
    gate: DependencyGate
    allowed_tools: list[str]
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
    summary: str = "",
    error: str | None = None,
    usage: dict[str, RoleUsage] | None = None,
    secrets: list[str] | None = None,
) -> dict[str, Any]:
    """Build the JSON record a step task returns (and the checkpoint keeps), secrets removed."""
    return {
        "id": step_id,
        "status": status,
        "attempts": attempts,
        "started_at": started_at,
        "ended_at": now() if status != "skipped" else None,
        "output": output,
        "summary": redact(summary, secrets),
        "error": redact(error, secrets),
        "usage": usage or {},
    }


def jsonable(value: Any) -> Any:
    """Convert a tool's return value to JSON data, or raise TypeError naming what is not."""
    if isinstance(value, str):
        return _valid_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):  # checkpoints store 64-bit integers; keep larger ones as text
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {_valid_text(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return jsonable(item())
    raise TypeError(
        f"the tool returned a {type(value).__name__}, which is not JSON data; tools must return "
        "dicts, lists, strings or numbers and keep large data in workspace files"
    )


def _valid_text(text: str) -> str:
    """Replace lone surrogates, which no checkpoint serializer can store."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def summarize(output: Any, limit: int = 240) -> str:
    """Return a one-line preview of an output."""
    if isinstance(output, dict) and REF_KEY in output:
        return (
            f"{output.get('bytes', '?')} bytes in {output[REF_KEY]}: {output.get('preview', '')}"[
                :limit
            ]
        )
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_reference(output: Any) -> bool:
    """Say whether an output in state is a reference to a file holding the real output."""
    return (
        isinstance(output, dict)
        and REF_KEY in output
        and set(output) <= {REF_KEY, "bytes", "preview"}
    )


async def store_output(value: Any, round_: ExecutionRound, step_id: int) -> Any:
    """Keep a small output as is; write a large one to the workspace and keep a reference."""
    text = json.dumps(value, ensure_ascii=False)
    size = len(text.encode("utf-8"))
    if size > MAX_OUTPUT_BYTES:
        raise ToolError(f"the output is {size} bytes; at most {MAX_OUTPUT_BYTES} are kept")
    if size <= round_.context.inline_output_limit:
        return value
    relative = f".planexec/outputs/{round_.run_id}/v{round_.plan['version']}-step{step_id}.json"

    def write() -> None:
        round_.workspace.prepare_output(relative).write_text(text, encoding="utf-8")

    await _in_daemon_thread(write)  # file I/O stays off the event loop
    return {REF_KEY: relative, "bytes": size, "preview": summarize(value, 200)}


def load_output(output: Any, workspace: Workspace) -> Any:
    """Return a step's full output, reading it back from the workspace if it was stored there."""
    if is_reference(output):
        path: Path = workspace.resolve(output[REF_KEY], must_exist=True)
        return json.loads(path.read_text(encoding="utf-8"))
    return output


async def _in_daemon_thread(fn: Callable[[], Any]) -> Any:
    """Run a blocking call in a daemon thread and await it; a hung call is abandoned, not joined."""
    return await run_in_thread(fn)


async def call_tool(tool_: BaseTool, args: dict[str, Any], config: RunnableConfig) -> Any:
    """Invoke a tool in its own thread (async tools on their own loop): see ``toolcalls``."""
    return await toolcalls.call_tool(tool_, args, config)


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, StepTimeout):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
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
) -> str:
    """Carry out a tool-less step with the executor model and the plan's tools (bounded loop)."""
    allowed = {name: round_.tools.get(name) for name in round_.allowed_tools}
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
                text = f"error: {call['name']!r} is not a tool of the approved plan; not run"
            else:
                try:
                    result = await asyncio.wait_for(
                        call_tool(allowed[call["name"]], call["args"], config),
                        round_.context.step_timeout,
                    )
                    text = json.dumps(jsonable(result), default=str)[:20_000]
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
    try:
        referenced = {ref for ref, _ in iter_references(step["args"])} | set(step["depends_on"])
        needed = {d: deps[d]["output"] for d in sorted(referenced & set(deps))}
        inputs: dict[int, Any] = dict(needed)
        if any(is_reference(out) for out in needed.values()):  # read files off the event loop
            inputs = await _in_daemon_thread(
                lambda: {d: load_output(out, round_.workspace) for d, out in needed.items()}
            )
        args = resolve_references(step["args"], inputs)
    except (ReferenceError_, ToolError, OSError, ValueError) as exc:
        error = f"cannot resolve arguments: {exc}"
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
        try:
            async with round_.slots():  # at most max_parallel_steps attempts at once
                await round_.store.check()  # no attempt starts once checkpoint writes fail
                with use_workspace(round_.workspace), call_scope(scope):
                    if step["tool"] is None:
                        work = _model_step(step, args, inputs, round_, config, usage)
                    else:
                        tool_ = round_.tools.get(step["tool"])
                        work = call_tool(tool_, args, config)
                    value = await within(work, ctx.step_timeout)  # ends at the limit, always
                output = await store_output(redact(jsonable(value), round_.secrets), round_, sid)
        except CheckpointStoreError:
            raise  # the step did not start; the executor node stops the run
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the step's, not the run's
            error = _describe_error(exc)
            if isinstance(exc, StepTimeout) and abandoned_of(round_.run_id, sid):
                error += " (the call did not stop: abandoned, still running)"
            transient = (
                retries_timeouts(tool_)  # a local timeout is retried only if the tool says so
                if isinstance(exc, StepTimeout)
                else isinstance(exc, TRANSIENT)
            )
            if transient and attempts < max_attempts:
                delay = ctx.retry_initial_interval * ctx.retry_backoff_factor ** (attempts - 1)
                write({"event": "step_retry", "step": sid, "attempt": attempts, "error": error})
                await asyncio.sleep(delay)  # backoff outside the slot
                continue
        else:
            summary = summarize(output)
            write({"event": "step_finished", "step": sid, "summary": summary, "at": now()})
            return outcome(
                sid,
                "succeeded",
                attempts=attempts,
                started_at=started,
                output=output,
                summary=summary,
                usage=usage,
                secrets=round_.secrets,
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
    )


def run_step_blocking(step: StepDoc, round_: ExecutionRound) -> dict[str, Any]:
    """Body of the sync step task: run the async step on the round's loop thread and wait."""
    result: dict[str, Any] = round_.steps_loop().run(lambda: run_step_async(step, round_))
    return result


async def run_step_async(step: StepDoc, round_: ExecutionRound) -> dict[str, Any]:
    """Body of the async step task: await dependencies on the loop, then run the step.

    Raises :class:`CheckpointStoreError`, recording nothing, once the store has failed.
    """
    deps = await round_.gate.wait_async(step["depends_on"])
    round_.store.raise_if_failed()  # neither run nor skipped: its record could not be kept
    result = await execute_step(step, deps, round_)
    round_.gate.publish(step["id"], result)  # dependents start now, not after the task commits
    return result
