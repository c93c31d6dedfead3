from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import TransientToolError
from planexec.llm.scripted import ScriptedReply
from planexec.storage.outputs import output_of
from planexec.tools import ToolRegistry
from planexec.tools.sandbox import Sandbox
from tests.helpers import (
    always_fails,
    echo,
    plan_of,
    plan_reply,
    scripted,
    step,
    text_reply,
    thread,
)


def run(graph, ctx_obj, *, mode: str = "sync", stream: bool = False):
    config = thread()
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=ctx_obj)
        return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj), config

    async def go():
        await graph.ainvoke({"task": "t"}, config, context=ctx_obj)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=ctx_obj)

    return asyncio.run(go()), config


# Concurrency is checked by what the steps see of each other, not by wall-clock thresholds:
# a rendezvous only opens when every party is running at once; a waiter only wakes when a step
# that runs after it has started; a gauge counts the steps running at the same moment.
EVENTS: dict[str, threading.Event] = {}
BARRIERS: dict[str, threading.Barrier] = {}
GAUGE = {"now": 0, "most": 0}
GAUGE_LOCK = threading.Lock()
PATIENCE = 10.0  # seconds a step waits for the others before it fails the test


@tool
def rendezvous(group: str, parties: int) -> str:
    """Wait until `parties` steps of `group` are all running, then return."""
    barrier = BARRIERS.setdefault(group, threading.Barrier(parties))
    try:
        barrier.wait(timeout=PATIENCE)
    except threading.BrokenBarrierError as exc:
        raise ValueError(f"{group}: the steps did not run together") from exc
    return "met"


@tool
async def wait_for(key: str) -> str:
    """Wait (without blocking the event loop) until another step signals `key`."""
    event = EVENTS.setdefault(key, threading.Event())
    for _ in range(int(PATIENCE / 0.01)):
        if event.is_set():
            return "signalled"
        await asyncio.sleep(0.01)
    raise ValueError(f"{key}: never signalled")


@tool
async def signal(key: str) -> str:
    """Wake the step waiting for `key`."""
    EVENTS.setdefault(key, threading.Event()).set()
    return "sent"


@tool
def gauge(seconds: float) -> int:
    """Count this step as running for `seconds`; record the most steps running at once."""
    with GAUGE_LOCK:
        GAUGE["now"] += 1
        GAUGE["most"] = max(GAUGE["most"], GAUGE["now"])
    time.sleep(seconds)
    with GAUGE_LOCK:
        GAUGE["now"] -= 1
    return GAUGE["most"]


def statuses(out: dict[str, Any]) -> dict[str, str]:
    return {k: v["status"] for k, v in out["steps"].items()}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_independent_steps_overlap_in_time(use_models, ctx, mode):
    group = f"overlap-{mode}"
    steps = [step(i, "rendezvous", {"group": group, "parties": 4}) for i in range(1, 5)]
    use_models(planner=scripted(plan_reply(plan_of(*steps))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([rendezvous]))
    out, _ = run(graph, ctx(max_parallel_steps=4, step_timeout=30), mode=mode)
    assert statuses(out) == dict.fromkeys("1234", "succeeded"), out["steps"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_starts_when_its_own_dependencies_are_done(use_models, ctx, mode):
    # 1 -> 3, and 2 is unrelated: 2 waits until 3 has run, so a level barrier (3 waiting for
    # every step of the level before it, 2 included) would leave 2 waiting until it fails
    key = f"no-barrier-{mode}"
    plan = plan_of(
        step(1, "signal", {"key": f"{key}-warmup"}),
        step(2, "wait_for", {"key": key}),
        step(3, "signal", {"key": key}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([wait_for, signal]))
    out, _ = run(graph, ctx(step_timeout=30), mode=mode)
    assert statuses(out) == dict.fromkeys("123", "succeeded"), out["steps"]


def test_parallelism_limit_is_respected(use_models, ctx):
    GAUGE.update(now=0, most=0)
    steps = [step(i, "gauge", {"seconds": 0.2}) for i in range(1, 6)]
    use_models(planner=scripted(plan_reply(plan_of(*steps))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([gauge]))
    out, _ = run(graph, ctx(max_parallel_steps=2))
    assert statuses(out) == dict.fromkeys("12345", "succeeded")
    assert GAUGE["most"] == 2  # never more than the limit, and the limit is used


calls: dict[str, int] = {}


@tool
def flaky(key: str, failures: int) -> str:
    """Fail with a transient error `failures` times, then succeed."""
    calls[key] = calls.get(key, 0) + 1
    if calls[key] <= failures:
        raise TransientToolError(f"busy (call {calls[key]})")
    return f"ok after {calls[key]}"


RELEASE = threading.Event()
HUNG = {"entered": 0, "left": 0}


@tool
def hangs(seconds: float) -> str:
    """Block until the test releases it (or `seconds` pass): far longer than any timeout."""
    HUNG["entered"] += 1
    RELEASE.wait(seconds)
    HUNG["left"] += 1
    return "woke up"


def test_transient_errors_are_retried_with_backoff(use_models, ctx):
    plan = plan_of(step(1, "flaky", {"key": "a", "failures": 2}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([flaky]))
    out, _ = run(graph, ctx(step_max_attempts=3))
    assert out["steps"]["1"]["status"] == "succeeded"
    assert out["steps"]["1"]["attempts"] == 3
    assert out["steps"]["1"]["output"] == "ok after 3"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hanging_tool_times_out_and_dependents_are_skipped(use_models, ctx, mode):
    plan = plan_of(
        step(1, "hangs", {"seconds": 60}),
        step(2, "echo", {"text": "$1"}, [1]),
        step(3, "echo", {"text": "independent"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([hangs, echo]))
    RELEASE.clear()
    HUNG.update(entered=0, left=0)
    try:
        out, _ = run(graph, ctx(step_timeout=0.3, step_max_attempts=2, max_replans=0), mode=mode)
        assert HUNG == {"entered": 1, "left": 0}  # the run ended with the call still hung
    finally:
        RELEASE.set()
    assert out["steps"]["1"] == {
        **out["steps"]["1"],
        "status": "failed",
        "error": "timed out after 0.3 s (the call did not stop: abandoned, still running)",
        "attempts": 1,  # a local timeout is not a transient error: not retried
    }
    assert out["steps"]["2"]["status"] == "skipped"
    assert "step 1 failed" in out["steps"]["2"]["error"]
    assert out["steps"]["3"]["output"] == "independent"
    assert out["final"]["status"] == "partial"
    assert "step 1 [hangs] failed: timed out" in out["final"]["answer"]


def test_large_outputs_go_to_a_file_and_still_flow_to_dependents(
    use_models, ctx, workspace, workspace_root
):
    big = "x" * 50_000
    plan = plan_of(step(1, "echo", {"text": big}), step(2, "echo", {"text": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    out, config = run(graph, ctx())
    first, second = out["steps"]["1"], out["steps"]["2"]
    assert first["output"] is None and set(first["output_file"]) == {
        "id",
        "bytes",
        "sha256",
        "preview",
    }
    assert first["output_file"]["bytes"] > 50_000 and "kept in a file" in first["summary"]
    store = Sandbox.at(workspace_root).output_store()
    assert output_of(first, store) == big and output_of(second, store) == big
    assert second["output_file"]["id"] != first["output_file"]["id"]
    assert out["final"]["status"] == "succeeded"
    assert len(str(graph.get_state(config).values["steps"])) < 5_000


def test_tool_less_step_uses_the_executor_model_with_only_the_steps_tools(use_models, ctx):
    plan = plan_of(
        step(1, "echo", {"text": "data"}),
        {**step(2, None, {"topic": "$1"}, [1], expected="a sentence"), "tools": ["echo"]},
    )
    executor = scripted(
        ScriptedReply(
            tool_calls=[
                {"name": "always_fails", "args": {}},
                {"name": "echo", "args": {"text": "tool says hi"}},
            ]
        ),
        text_reply("Final: data summarised"),
    )
    use_models(planner=scripted(plan_reply(plan)), executor=executor)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo, always_fails]))
    out, config = run(graph, ctx())
    assert out["steps"]["2"]["output"] == "Final: data summarised"
    second_prompt = executor.prompts[1]
    assert "'always_fails' is not a tool of this step; not run" in second_prompt
    assert "tool says hi" in second_prompt
    usage = graph.get_state(config).values["usage"]
    assert usage["executor"]["calls"] == 2 and usage["planner"]["calls"] == 1


def test_progress_is_streamed_per_step(use_models, ctx):
    plan = plan_of(
        step(1, "echo", {"text": "a"}),
        step(2, "always_fails", {}, []),
        step(3, "echo", {"text": "$2"}, [2]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo, always_fails]))
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx(max_replans=0))
    events = [
        c
        for c in graph.stream(
            Command(resume={"action": "approve"}),
            config,
            context=ctx(max_replans=0),
            stream_mode="custom",
        )
    ]
    kinds = {(e["event"], e["step"]) for e in events}
    assert {
        ("step_started", 1),
        ("step_finished", 1),
        ("step_failed", 2),
        ("step_skipped", 3),
    } <= kinds
