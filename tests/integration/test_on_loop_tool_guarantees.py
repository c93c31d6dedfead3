"""Every promise made for a tool holds for async tools marked ``runs_on_loop`` (on the steps' loop).

Each test drives planexec as a user would (build_graph, invoke / ainvoke / stream with
scripted models) and checks that a promise made for every tool still holds for a tool marked
``runs_on_loop``: time limits and the count of abandoned calls, no wedge, no leftover thread,
no secret leak, odd exceptions failing only their own step, marks only from code, retries and
bounds, cancellation and resumption. Where a behaviour is compared, it is compared with the same
tool left off the loop (a worker thread of its own).

Scenarios that could wedge the process (a step loop that dies under a blocked LangGraph
thread) run in a subprocess with a hard time limit (``python -m`` this module).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.types import Command

from planexec import build_graph
from planexec.concurrency.abandoned import abandoned_calls
from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT, RUNS_ON_LOOP
from planexec.redaction.secrets import REDACTED
from planexec.tools import ToolRegistry
from tests.helpers import (
    async_sleep_for,
    calls,
    count,
    loop_threads,
    plan_of,
    plan_reply,
    run_plan,
    scenario_outcome,
    scenario_report,
    scripted,
    step,
    swallows,
    thread,
    wait_until,
)

SECRET = "sk-hostile-onloop-9876543210zyxwvutsrq"
ALL_MODES = ["values", "updates", "custom", "messages", "debug", "tasks", "checkpoints"]


class Boom(BaseException):
    """A BaseException subclass that is neither an Exception nor an exit."""


class BadStr(Exception):
    """An exception whose str() raises."""

    def __str__(self) -> str:
        raise RuntimeError("str() of this error raises")


@tool
async def raises_kind(kind: str) -> str:
    """Raise something odd (after one await) from wherever the call runs."""
    await asyncio.sleep(0)
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "stop":
        raise StopIteration
    if kind == "genexit":
        raise GeneratorExit
    if kind == "boom":
        raise Boom("boom")
    if kind == "badstr":
        raise BadStr
    if kind == "cancel":
        raise asyncio.CancelledError
    return "fine"


raises_kind_off = raises_kind.model_copy(update={"name": "raises_kind_off"})


@tool
async def polite(key: str, seconds: float) -> str:
    """Count the call; take `seconds` the first time only (stops when cancelled)."""
    count(key)
    if calls[key] == 1:
        await asyncio.sleep(seconds)
    return f"polite {calls[key]}"


@tool
async def counted(key: str) -> str:
    """Count the call."""
    count(key)
    return f"counted {calls[key]}"


@tool
async def leaves_task_behind(label: str) -> str:
    """Return at once, leaving a task of its own running on its loop (until cancelled)."""

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(0.05)

    HELD.append(asyncio.get_running_loop().create_task(heartbeat()))
    return label


HELD: list[asyncio.Task[None]] = []


@tool
async def leaks(kind: str) -> Any:
    """Put the secret everywhere a tool can: stream, log, return, raise (chained)."""
    get_stream_writer()({"says": SECRET, "nested": [f"x {SECRET} y"]})
    logging.getLogger("hostile.tool").warning("token is %s", SECRET)
    if kind == "chain":
        try:
            raise KeyError(SECRET)
        except KeyError as inner:
            raise RuntimeError(f"wrapped {SECRET}") from inner
    if kind == "note":
        err = ValueError("plain")
        err.add_note(SECRET)
        raise err
    if kind == "base":
        raise Boom(SECRET)
    return {"key": SECRET, "list": [SECRET], "text": f"the key is {SECRET}"}


def onloop(*tools: Any, off: tuple[Any, ...] = ()) -> ToolRegistry:
    registry = ToolRegistry([async_sleep_for, *off])
    for item in tools:
        registry.register(item, runs_on_loop=True)
    return registry


# --- 4. what the tool raises fails only its own step ------------------------------------------


def in_subprocess(*args: str, seconds: float = 60.0) -> dict[str, Any]:
    """Run a scenario of this module in a fresh process; return its report (or a wedge).

    A wedged run never ends; ``seconds`` only bounds how long a failing test waits, and leaves
    room for a fresh process to start on a loaded machine (a few seconds of imports alone).
    """
    return scenario_report("tests.integration.test_on_loop_tool_guarantees", *args, seconds=seconds)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["exit", "interrupt"])
def test_an_on_loop_tool_that_raises_an_exit_fails_only_its_step(use_models, ctx, mode, kind):
    """SystemExit / KeyboardInterrupt raised by the tool are the tool's, not the process's.

    Off the loop (the control, in this process) both are reported as ``the tool raised ...``
    and the run goes on. On the loop the same run happens in a subprocess (it may wedge).
    """
    name = {"exit": "SystemExit", "interrupt": "KeyboardInterrupt"}[kind]
    plan = plan_of(
        step(1, "raises_kind", {"kind": kind}), step(2, "async_sleep_for", {"seconds": 0.05})
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([raises_kind, async_sleep_for])
    )
    out = run_plan(graph, ctx(max_replans=0, step_max_attempts=1), mode)
    control = {
        "outcome": "ended",
        "steps": {k: [v["status"], v.get("error")] for k, v in out["steps"].items()},
    }
    assert control["steps"] == {
        "1": ["failed", f"the tool raised {name}"],
        "2": ["succeeded", None],
    }
    report = in_subprocess(kind, mode, "on")
    assert report == control


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_odd_exceptions_of_an_on_loop_tool_are_reported_as_off_the_loop(use_models, ctx, mode):
    kinds = ["genexit", "boom", "cancel", "stop", "badstr"]
    plan = plan_of(
        *[step(i + 1, "raises_kind", {"kind": k}) for i, k in enumerate(kinds)],
        *[step(i + 1 + len(kinds), "raises_kind_off", {"kind": k}) for i, k in enumerate(kinds)],
        step(2 * len(kinds) + 1, "async_sleep_for", {"seconds": 0.01}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=onloop(raises_kind, off=(raises_kind_off,))
    )
    out = run_plan(graph, ctx(max_replans=0, step_max_attempts=1), mode)
    steps = out["steps"]
    for i, kind in enumerate(kinds):
        on, off = steps[str(i + 1)], steps[str(i + 1 + len(kinds))]
        assert on["status"] == off["status"] == "failed", kind
        assert on["error"] == off["error"], kind
    assert steps["1"]["error"] == "the tool raised GeneratorExit"
    assert steps["2"]["error"] == "the tool raised Boom"
    assert steps["3"]["error"] == "the tool raised CancelledError"
    assert steps[str(2 * len(kinds) + 1)]["status"] == "succeeded"


# --- 1. time limits under invoke, ainvoke and every stream mode ---------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timed_out_on_loop_call_under_every_stream_mode_is_counted_then_uncounted(
    use_models, ctx, monkeypatch, mode
):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    plan = plan_of(
        step(1, "swallows", {"key": f"stream-{mode}", "seconds": 2.5}),
        step(2, "leaks", {"kind": "return"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(swallows, leaks))
    context = ctx(step_timeout=0.3, step_max_attempts=2, max_replans=0)
    config = thread()
    chunks: list[Any] = []
    payloads = ({"task": "t"}, Command(resume={"action": "approve"}))
    started = time.time()
    if mode == "sync":
        for payload in payloads:
            chunks += graph.stream(
                payload, config, context=context, stream_mode=ALL_MODES, subgraphs=True
            )
        seconds, left = time.time() - started, abandoned_calls()
        values = graph.get_state(config).values
    else:

        async def go() -> Any:
            for payload in payloads:
                async for chunk in graph.astream(
                    payload, config, context=context, stream_mode=ALL_MODES, subgraphs=True
                ):
                    chunks.append(chunk)
            at_end = (time.time() - started, abandoned_calls())
            return (await graph.aget_state(config)).values, at_end

        values, (seconds, left) = asyncio.run(go())
    assert seconds < 2.0, seconds  # the call goes on for 2.5 s: nobody waited for it
    assert values["steps"]["1"]["error"] == (
        "timed out after 0.3 s (the call did not stop: abandoned, still running)"
    )
    assert values["steps"]["1"]["attempts"] == 1  # not retried: it says nothing of timeouts
    assert values["steps"]["2"]["output"]["key"] == REDACTED
    if mode == "sync":  # async: asyncio.run waits for what is left on its loop
        assert [(c["tool"], c["step"]) for c in left] == [("swallows", 1)]
    assert wait_until(lambda: not abandoned_calls(), 3)
    text = repr(chunks) + repr(values) + repr(list(graph.get_state_history(config)))
    assert SECRET not in text
    assert {mode for _, mode, _ in chunks} >= {"values", "updates", "custom", "debug", "tasks"}


# --- 2. nothing wedges, nothing accumulates ------------------------------------------------------


def test_many_sync_runs_with_abandoned_on_loop_calls_leave_no_thread(use_models, ctx, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    for n in range(6):
        plan = plan_of(
            step(1, "swallows", {"key": f"many-{n}", "seconds": 0.5}),
            step(2, "counted", {"key": f"many-{n}"}),
        )
        use_models(planner=scripted(plan_reply(plan)))
        graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(swallows, counted))
        started = time.time()
        out = run_plan(graph, ctx(step_timeout=0.1, step_max_attempts=1, max_replans=0), "sync")
        assert time.time() - started < 0.8
        assert out["steps"]["1"]["status"] == "failed"
        assert out["steps"]["2"]["status"] == "succeeded"
    assert abandoned_calls()  # the last ones go on for a while
    assert wait_until(lambda: not abandoned_calls(), 3)
    assert wait_until(lambda: len(loop_threads()) <= 1, 3), loop_threads()
    problems = [r.getMessage() for r in caplog.records]
    assert not [p for p in problems if "destroyed" in p or "closed" in p], problems


def test_a_task_an_on_loop_tool_leaves_behind_keeps_no_thread_per_sync_run(use_models, ctx):
    """Off the loop, what a call leaves on its worker's loop is cancelled after the call
    (planexec.concurrency.workers). On the loop, under a sync ``invoke``, every run's steps share
    planexec's one background loop: a leftover keeps no thread of its own, and it is cancelled
    when its call ends."""
    HELD.clear()
    for n in range(4):
        plan = plan_of(step(1, "leaves_task_behind", {"label": f"r{n}"}))
        use_models(planner=scripted(plan_reply(plan)))
        graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(leaves_task_behind))
        out = run_plan(graph, ctx(max_replans=0), "sync")
        assert out["steps"]["1"]["status"] == "succeeded"
    try:
        assert not abandoned_calls()
        assert wait_until(lambda: len(loop_threads()) <= 1, 1.0), loop_threads()
        assert wait_until(lambda: all(task.done() for task in HELD), 2.0), HELD
    finally:  # stop the heartbeats so the threads end
        for task in HELD:
            with contextlib.suppress(RuntimeError):  # its loop closed: cancelled there already
                task.get_loop().call_soon_threadsafe(task.cancel)


def test_an_on_loop_call_abandoned_under_ainvoke_in_a_long_lived_loop_is_uncounted(use_models, ctx):
    """A server keeps its loop: the abandoned call ends there and is uncounted."""
    plan = plan_of(step(1, "swallows", {"key": "server-like", "seconds": 0.6}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(swallows))

    async def go() -> tuple[Any, list[Any], bool]:
        out_ = await run_plan_async(graph, ctx(step_timeout=0.2, max_replans=0))
        left_ = abandoned_calls()
        deadline = time.time() + 2
        while abandoned_calls() and time.time() < deadline:
            await asyncio.sleep(0.02)
        return out_, left_, not abandoned_calls()

    out, left, cleared = asyncio.run(go())
    assert out["steps"]["1"]["status"] == "failed"
    assert [c["tool"] for c in left] == ["swallows"]
    assert cleared


async def run_plan_async(graph: Any, context: Any, config: Any = None) -> dict[str, Any]:
    config = config or thread()
    await graph.ainvoke({"task": "t"}, config, context=context)
    return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)


@tool
async def cleans_up_late(seconds: float) -> str:
    """Swallow cancellation for `seconds`, then start a short clean-up task and return."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(max(0.0, deadline - time.time()))

    async def cleanup() -> None:
        await asyncio.sleep(0.05)

    asyncio.get_running_loop().create_task(cleanup())
    return "late"


def test_a_task_started_by_an_abandoned_on_loop_call_is_not_destroyed_pending(
    use_models, ctx, caplog
):
    """Under a sync run the round's loop stops once the tasks it saw at the round's end are
    done; a task the abandoned call starts as it ends must not be destroyed while pending."""
    import gc

    caplog.set_level(logging.ERROR, logger="asyncio")
    plan = plan_of(step(1, "cleans_up_late", {"seconds": 0.4}))
    context = ctx(step_timeout=0.1, step_max_attempts=1, max_replans=0)
    for where_, tools in [("off", ToolRegistry([cleans_up_late])), ("on", onloop(cleans_up_late))]:
        caplog.clear()
        use_models(planner=scripted(plan_reply(plan)))
        graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
        out = run_plan(graph, context, "sync")
        assert out["steps"]["1"]["status"] == "failed"
        assert wait_until(lambda: not abandoned_calls(), 2)
        time.sleep(0.3)
        gc.collect()
        problems = [r.getMessage() for r in caplog.records]
        assert not [p for p in problems if "destroyed but it is pending" in p], (where_, problems)


# --- 3. no secret leaks -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_on_loop_tool_leaks_no_secret_to_state_streams_tracers_or_files(
    use_models, ctx, monkeypatch, workspace, tmp_path, mode
):
    from tests.integration.test_tracing import Recorder

    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET + "-openai")
    kinds = ["return", "chain", "note", "base"]
    plan = plan_of(*[step(i + 1, "leaks", {"kind": k}) for i, k in enumerate(kinds)])
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(leaks))
    recorder = Recorder()
    config = {**thread(), "callbacks": [recorder]}
    context = ctx(max_replans=0, step_max_attempts=1)
    chunks: list[Any] = []
    payloads = ({"task": "t"}, Command(resume={"action": "approve"}))
    if mode == "sync":
        for payload in payloads:
            chunks += graph.stream(payload, config, context=context, stream_mode=ALL_MODES)
    else:

        async def go() -> None:
            for payload in payloads:
                async for chunk in graph.astream(
                    payload, config, context=context, stream_mode=ALL_MODES
                ):
                    chunks.append(chunk)

        asyncio.run(go())
    state = graph.get_state(config)
    steps = state.values["steps"]
    assert steps["1"]["output"]["key"] == REDACTED
    assert steps["2"]["error"] == f"RuntimeError: wrapped {REDACTED}"
    assert steps["4"]["error"] == "the tool raised Boom"
    custom = [data for m, data in chunks if m == "custom" and "says" in data]
    assert custom and all(c["says"] == REDACTED for c in custom)
    traced = repr([(r.inputs, r.outputs, r.error, r.extra) for r in recorder.runs])
    history = repr(list(graph.get_state_history(config)))
    files = "".join(
        p.read_text(errors="replace")
        for folder in (workspace, tmp_path)
        for p in folder.rglob("*")
        if p.is_file()
    )
    for where, text in [
        ("streams", repr(chunks)),
        ("state", repr(state)),
        ("checkpoints", history),
        ("tracer", traced),
        ("files", files),
    ]:
        assert SECRET not in text, where


# --- 5. the mark comes only from the tool's author, in code -------------------------------------


@tool
async def where(label: str) -> str:
    """Say which thread ran the call."""
    return threading.current_thread().name


def test_a_plan_a_reviewer_edit_the_state_or_env_cannot_mark_a_tool(use_models, ctx, monkeypatch):
    monkeypatch.setenv("PLANEXEC_RUNS_ON_LOOP", "true")
    monkeypatch.setenv("RUNS_ON_LOOP", "1")
    marked = {RUNS_ON_LOOP: True, "metadata": {RUNS_ON_LOOP: True}}
    planner = scripted(
        plan_reply(plan_of({**step(1, "where", {"label": "a"}), **marked})),
        plan_reply(plan_of(step(1, "where", {"label": "a"}))),
    )
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([where]))
    config = thread()
    context = ctx(max_replans=0)
    graph.invoke({"task": "t"}, config, context=context)
    assert len(planner.prompts) == 2  # the marked plan went back to the planner
    with contextlib.suppress(Exception):  # a state edit (refused or ignored: either is fine)
        graph.update_state(config, {"tools": {"where": {"metadata": {RUNS_ON_LOOP: True}}}})
    edited = plan_of(
        {**step(1, "where", {"label": "a"}), **marked},
        {**step(2, "where", {"label": "b"}), **marked},
    )
    out = graph.invoke(
        Command(resume={"action": "edit", "plan": edited, RUNS_ON_LOOP: True}),
        config,
        context=context,
    )
    if "__interrupt__" in out:  # the marked edit was refused: approve the plan as it is
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    ran = [s.get("output") for s in out.get("steps", {}).values() if s.get("output")]
    assert ran, out
    assert all(name.startswith("planexec-tool") for name in ran), ran
    assert RUNS_ON_LOOP not in repr(out.get("plan"))


def test_marks_that_are_not_bools_or_on_sync_tools_are_refused_every_way():
    @tool
    def sync_one(text: str) -> str:
        """Sync."""
        return text

    for value in (1, "true", 1.0, [True], {"x": 1}):
        with pytest.raises(ValueError, match="runs_on_loop"):
            ToolRegistry().register(where, runs_on_loop=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="async"):
        ToolRegistry().register(sync_one, runs_on_loop=True)
    with pytest.raises(ValueError, match="async"):
        ToolRegistry([sync_one.model_copy(update={"metadata": {RUNS_ON_LOOP: True}})])
    # marked after registration (by mutation): a sync tool still runs on a worker, a non-bool
    # mark is not a yes
    from planexec.concurrency.toolcalls import runs_on_loop

    registry = ToolRegistry([where])
    registry.get("where").metadata = {RUNS_ON_LOOP: "yes"}
    assert not runs_on_loop(registry.get("where"))


# --- 6. retries, bounds, crash / resume ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retry_on_timeout_and_the_own_step_refusal_hold_on_the_loop(use_models, ctx, mode):
    key = f"retry-{mode}-{time.time()}"
    retried_polite = polite.model_copy(update={"name": "retried_polite"})
    retried_polite.metadata = {RETRY_ON_TIMEOUT: True}
    retried_swallows = swallows.model_copy(update={"name": "retried_swallows"})
    retried_swallows.metadata = {RETRY_ON_TIMEOUT: True}
    plan = plan_of(
        step(1, "retried_polite", {"key": key, "seconds": 5}),
        step(2, "retried_swallows", {"key": key + "s", "seconds": 3.0}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=onloop(retried_polite, retried_swallows)
    )
    started = time.time()
    out = run_plan(graph, ctx(step_timeout=0.2, step_max_attempts=2, max_replans=0), mode)
    if mode == "sync":
        assert time.time() - started < 2.5  # the swallowing call goes on for 3 s
    one, two = out["steps"]["1"], out["steps"]["2"]
    assert one["status"] == "succeeded" and one["output"] == "polite 2"
    assert one["attempts"] == 2
    assert two["status"] == "failed"
    assert calls[key + "s"] == 1  # never twice at once
    assert "a step never runs twice at once" in two["error"], two["error"]
    assert wait_until(lambda: not abandoned_calls(), 3)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_bound_on_abandoned_calls_refuses_on_loop_calls(use_models, ctx, mode):
    key = f"bound-{mode}-{time.time()}"
    plan = plan_of(
        step(1, "swallows", {"key": key, "seconds": 1.0}),
        step(2, "counted", {"key": key}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(swallows, counted))
    out = run_plan(
        graph,
        ctx(step_timeout=0.2, step_max_attempts=1, max_replans=0, max_abandoned_calls=1),
        mode,
    )
    assert out["steps"]["1"]["status"] == "failed"
    two = out["steps"]["2"]
    if two["status"] == "failed":
        assert "max_abandoned_calls is 1" in two["error"], two["error"]
        assert calls.get(key) is None
    else:  # async: asyncio.run ended only once the call did, so it was no longer abandoned
        assert mode == "async" and two["status"] == "skipped" or calls.get(key) == 1, two
    assert wait_until(lambda: not abandoned_calls(), 3)


# --- 7. cancellation and resumption --------------------------------------------------------------


@pytest.mark.parametrize("tool_name", ["polite", "swallows"])
def test_cancelling_ainvoke_during_an_on_loop_call_stops_the_run_and_it_resumes(
    use_models, ctx, tool_name
):
    key = f"cancel-{tool_name}-{time.time()}"
    plan = plan_of(
        step(1, "counted", {"key": key + "-first"}),
        step(2, tool_name, {"key": key, "seconds": 2.0}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=onloop(counted, polite, swallows))
    config = thread()
    context = ctx(max_replans=0, step_timeout=5)

    async def go() -> tuple[float, Any]:
        await graph.ainvoke({"task": "t"}, config, context=context)
        run = asyncio.ensure_future(
            graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)
        )
        deadline = time.time() + 2
        while calls.get(key) is None and time.time() < deadline:
            await asyncio.sleep(0.01)
        assert calls.get(key) == 1
        run.cancel()
        started = time.time()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        stopped_in = time.time() - started
        while abandoned_calls() and time.time() < deadline + 2:
            await asyncio.sleep(0.02)
        out = await graph.ainvoke(None, config, context=context)
        return stopped_in, out

    stopped_in, out = asyncio.run(go())
    assert stopped_in < 1.0, stopped_in  # the call would go on for 2 s
    assert not abandoned_calls()
    assert calls[key + "-first"] == 1  # a finished step never re-runs
    assert out["steps"]["1"]["status"] == "succeeded"
    assert out["steps"]["2"]["status"] in ("succeeded", "failed"), out["steps"]["2"]
    assert out["final"]["status"] in ("succeeded", "partial", "failed")
    assert calls[key] == 2  # the cancelled step ran again on resume


@pytest.mark.parametrize("where_", ["off", "on"])
def test_leaving_a_sync_stream_during_an_on_loop_call_leaves_the_thread_resumable(
    use_models, ctx, where_
):
    key = f"leave-{where_}-{time.time()}"
    plan = plan_of(
        step(1, "counted", {"key": key + "-first"}),
        step(2, "polite", {"key": key, "seconds": 0.6}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    tools = onloop(counted, polite) if where_ == "on" else ToolRegistry([counted, polite])
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    config, context = thread(), ctx(max_replans=0)
    graph.invoke({"task": "t"}, config, context=context)
    started = time.time()
    stream = graph.stream(
        Command(resume={"action": "approve"}), config, context=context, stream_mode="updates"
    )
    for _ in stream:
        if calls.get(key):
            break
    stream.close()
    assert time.time() - started < 2
    out = graph.invoke(None, config, context=context)
    assert out["steps"]["1"]["status"] == out["steps"]["2"]["status"] == "succeeded", out["steps"]
    assert calls[key + "-first"] == 1
    assert wait_until(lambda: not abandoned_calls(), 2)
    assert wait_until(lambda: len(loop_threads()) <= 1, 2), loop_threads()


# --- subprocess scenarios ------------------------------------------------------------------------


def _scenario(kind: str, mode: str, where_: str) -> dict[str, Any]:
    plan = plan_of(
        step(1, "raises_kind", {"kind": kind}), step(2, "async_sleep_for", {"seconds": 0.05})
    )
    tools = ToolRegistry([async_sleep_for])
    tools.register(raises_kind, runs_on_loop=where_ == "on")
    return scenario_outcome(plan, tools, mode)


if __name__ == "__main__":
    os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
    print("REPORT " + json.dumps(_scenario(*sys.argv[1:4])), flush=True)
    os._exit(0)  # a wedged LangGraph thread would keep the interpreter from exiting
