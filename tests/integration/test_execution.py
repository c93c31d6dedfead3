from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import TransientToolError
from planexec.outputs import output_of
from planexec.sandbox import Sandbox
from planexec.scripted import ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import (
    always_fails,
    async_sleep_for,
    echo,
    plan_of,
    plan_reply,
    scripted,
    sleep_for,
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


def spans(out: dict[str, Any]) -> dict[int, tuple[float, float]]:
    return {
        int(k): (v["output"]["start"], v["output"]["end"])
        for k, v in out["steps"].items()
        if v["status"] == "succeeded" and isinstance(v["output"], dict)
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_independent_steps_overlap_in_time(use_models, ctx, mode):
    steps = [step(i, "sleep_for", {"seconds": 0.4, "label": str(i)}) for i in range(1, 5)]
    use_models(planner=scripted(plan_reply(plan_of(*steps))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([sleep_for]))
    out, _ = run(graph, ctx(max_parallel_steps=4), mode=mode)
    s = spans(out)
    makespan = max(e for _, e in s.values()) - min(b for b, _ in s.values())
    assert makespan < 0.8, s  # four 0.4 s steps, run together
    assert max(b for b, _ in s.values()) < min(e for _, e in s.values())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_starts_when_its_own_dependencies_are_done(use_models, ctx, mode):
    # 1 (fast) -> 3 ; 2 is slow and unrelated: 3 must not wait for 2 (no level barrier)
    plan = plan_of(
        step(1, "async_sleep_for", {"seconds": 0.05}),
        step(2, "async_sleep_for", {"seconds": 0.8}),
        step(3, "async_sleep_for", {"seconds": 0.05, "label": "after $1.label"}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([async_sleep_for]))
    out, _ = run(graph, ctx(), mode=mode)
    s = spans(out)
    assert s[3][0] >= s[1][1]
    assert s[3][1] < s[2][1] - 0.3, s


def test_parallelism_limit_is_respected(use_models, ctx):
    steps = [step(i, "sleep_for", {"seconds": 0.2}) for i in range(1, 5)]
    use_models(planner=scripted(plan_reply(plan_of(*steps))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([sleep_for]))
    out, _ = run(graph, ctx(max_parallel_steps=2))
    s = sorted(spans(out).values())
    running_at = lambda t: sum(b <= t < e for b, e in s)  # noqa: E731
    assert max(running_at(b + 0.01) for b, _ in s) <= 2


calls: dict[str, int] = {}


@tool
def flaky(key: str, failures: int) -> str:
    """Fail with a transient error `failures` times, then succeed."""
    calls[key] = calls.get(key, 0) + 1
    if calls[key] <= failures:
        raise TransientToolError(f"busy (call {calls[key]})")
    return f"ok after {calls[key]}"


@tool
def hangs(seconds: float) -> str:
    """Block far longer than any timeout."""
    time.sleep(seconds)
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
        step(1, "hangs", {"seconds": 3}),
        step(2, "echo", {"text": "$1"}, [1]),
        step(3, "echo", {"text": "independent"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([hangs, echo]))
    started = time.time()
    out, _ = run(graph, ctx(step_timeout=0.3, step_max_attempts=2, max_replans=0), mode=mode)
    assert time.time() - started < 2.5  # the hung call is abandoned, not waited for
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
