"""Tools that misbehave against the clock: a timeout is a timeout whatever the tool does.

An async tool that swallows CancelledError, an async tool that blocks the event loop, a
timed-out tool whose call goes on: each fails only its own step, on time; local timeouts are
retried only for tools that say so; abandoned calls are counted and bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.concurrency.abandoned import abandoned_calls
from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT
from planexec.llm.scripted import ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import (
    async_sleep_for,
    echo,
    plan_of,
    plan_reply,
    scripted,
    step,
    text_reply,
    thread,
)
from tests.integration.fault_graph import blocks_loop

calls: dict[str, list[float]] = {}
ended: dict[str, list[float]] = {}


def record(key: str, what: dict[str, list[float]]) -> None:
    what.setdefault(key, []).append(time.time())


@tool
async def stubborn(key: str, seconds: float) -> str:
    """Work for `seconds`, ignoring cancellation (it swallows CancelledError)."""
    record(key, calls)
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(asyncio.CancelledError):  # the misbehaviour under test
            await asyncio.sleep(deadline - time.time())
    record(key, ended)
    return "finished late"


@tool
def slow_load(key: str, seconds: float) -> str:
    """A sync tool that takes `seconds` (a big load); threads cannot be cancelled."""
    record(key, calls)
    time.sleep(seconds)
    record(key, ended)
    return "loaded"


@tool
async def polite(key: str, seconds: float) -> str:
    """An async tool that stops when cancelled."""
    record(key, calls)
    try:
        await asyncio.sleep(seconds)
    finally:
        record(key, ended)
    return "polite"


polite.metadata = {RETRY_ON_TIMEOUT: True}
retried_load = slow_load.model_copy(update={"name": "retried_load"})
retried_load.metadata = {RETRY_ON_TIMEOUT: True}

TOOLS = ToolRegistry(
    [stubborn, blocks_loop, slow_load, polite, retried_load, async_sleep_for, echo]
)


def run(ctx_obj: Any, mode: str) -> dict[str, Any]:
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=ctx_obj)
        return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj)

    async def go() -> dict[str, Any]:
        await graph.ainvoke({"task": "t"}, config, context=ctx_obj)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=ctx_obj)

    return asyncio.run(go())


def no_abandoned_calls(timeout: float = 10) -> None:
    """Wait until calls other tests abandoned have ended (each one runs for a bounded time)."""
    deadline = time.time() + timeout
    while abandoned_calls() and time.time() < deadline:
        time.sleep(0.05)
    assert not abandoned_calls(), abandoned_calls()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_async_tool_that_swallows_cancellation_still_times_out_on_time(use_models, ctx, mode):
    no_abandoned_calls()
    key = f"swallow-{mode}"
    plan = plan_of(
        step(1, "stubborn", {"key": key, "seconds": 2.0}), step(2, "echo", {"text": "x"})
    )
    use_models(planner=scripted(plan_reply(plan)))
    started = time.time()
    out = run(ctx(step_timeout=0.5, step_max_attempts=3, max_replans=0), mode)
    elapsed = time.time() - started
    assert elapsed < 1.5, elapsed  # not 2.0 s: nobody waited for the tool to give up
    record_ = out["steps"]["1"]
    assert record_["status"] == "failed" and record_["attempts"] == 1
    assert record_["error"] == (
        "timed out after 0.5 s (the call did not stop: abandoned, still running)"
    )
    assert out["steps"]["2"]["status"] == "succeeded"
    assert len(calls[key]) == 1 and key not in ended  # still running, counted
    assert [c["step"] for c in abandoned_calls() if c["tool"] == "stubborn"] == [1]
    deadline = time.time() + 3
    while key not in ended and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.05)
    assert not [c for c in abandoned_calls() if c["tool"] == "stubborn"]  # ended: uncounted
    assert out["steps"]["1"]["output"] is None  # its late result was never recorded


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_async_tool_that_blocks_its_loop_stalls_no_other_step(use_models, ctx, mode):
    plan = plan_of(
        step(1, "blocks_loop", {"seconds": 1.5}),
        step(2, "async_sleep_for", {"seconds": 0.1, "label": "a"}),
        step(3, "async_sleep_for", {"seconds": 0.1, "label": "b"}, [2]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    out = run(ctx(max_replans=0), mode)
    first, second, third = (out["steps"][i]["output"] for i in "123")
    assert first["end"] - first["start"] >= 1.5
    # steps 2 and 3 ran while step 1 held its own loop, not after it let go
    assert third["end"] < first["end"] - 0.5, (first, second, third)
    assert second["start"] < first["start"] + 0.5, (first, second)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timed_out_tool_is_not_retried_unless_it_says_its_timeouts_are_transient(
    use_models, ctx, mode
):
    no_abandoned_calls()
    keys = {name: f"{name}-{mode}" for name in ("slow_load", "polite", "retried_load")}
    plan = plan_of(
        step(1, "slow_load", {"key": keys["slow_load"], "seconds": 1.0}),
        step(2, "polite", {"key": keys["polite"], "seconds": 5}),
        step(3, "retried_load", {"key": keys["retried_load"], "seconds": 1.0}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    out = run(ctx(step_timeout=0.3, step_max_attempts=3, max_replans=0), mode)
    steps = out["steps"]

    # a local timeout is not a transient error: one attempt
    assert steps["1"]["attempts"] == 1 and len(calls[keys["slow_load"]]) == 1
    # the tool said its timeouts are transient, and its attempts stop when cancelled: retried,
    # each attempt over before the next one starts
    assert steps["2"]["attempts"] == 3 and len(calls[keys["polite"]]) == 3
    starts, ends = calls[keys["polite"]], ended[keys["polite"]]
    assert all(ends[i] <= starts[i + 1] for i in range(2))
    # transient too, but its first call is still running: no second call on top of it
    assert len(calls[keys["retried_load"]]) == 1
    assert steps["3"]["attempts"] == 2 and steps["3"]["status"] == "failed"
    assert steps["3"]["error"].startswith(
        "not started: an earlier call of this step (retried_load) was given up on (it timed out, "
        "or its run was stopped) and is still running"
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_abandoned_calls_are_bounded_per_process(use_models, ctx, mode):
    no_abandoned_calls()
    # 1 and 2 time out at 1.5 s and run on until 5 s (abandoned); 3 and 4 take 0.9 s each
    # (0.6 s inside the limit, even on a busy machine), so 5 starts at about 1.8 s
    plan = plan_of(
        step(1, "slow_load", {"key": f"bound-1-{mode}", "seconds": 5}),
        step(2, "slow_load", {"key": f"bound-2-{mode}", "seconds": 5}),
        step(3, "async_sleep_for", {"seconds": 0.9}),
        step(4, "async_sleep_for", {"seconds": 0.9}, [3]),
        step(5, "echo", {"text": "starts at 1.8 s, while 1 and 2 run on, abandoned"}, [4]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    out = run(ctx(step_timeout=1.5, max_abandoned_calls=2, max_replans=0), mode)
    statuses = [out["steps"][i]["status"] for i in "12345"]
    assert statuses == ["failed", "failed", "succeeded", "succeeded", "failed"]
    assert out["steps"]["5"]["error"] == (
        "not started: 2 tool calls given up on are still running in this process "
        "(max_abandoned_calls is 2); echo starts once fewer run"
    )
    assert sorted(c["step"] for c in abandoned_calls()) == [1, 2]
    no_abandoned_calls(timeout=6)  # they end, and are no longer counted
    assert len(calls[f"bound-1-{mode}"]) == len(ended[f"bound-1-{mode}"]) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_less_step_ends_on_time_whatever_its_tools_do(use_models, ctx, mode):
    no_abandoned_calls()
    plan = plan_of(
        step(1, "stubborn", {"key": f"quick-{mode}", "seconds": 0.01}),
        {**step(2, None, {"topic": "$1"}, [1], expected="a sentence"), "tools": ["stubborn"]},
    )
    executor = scripted(
        ScriptedReply(
            tool_calls=[{"name": "stubborn", "args": {"key": f"model-{mode}", "seconds": 2}}]
        ),
        text_reply("never reached"),
    )
    use_models(planner=scripted(plan_reply(plan)), executor=executor)
    started = time.time()
    out = run(ctx(step_timeout=0.5, max_replans=0), mode)
    assert time.time() - started < 1.5  # not the 2 s the tool takes to give up
    assert out["steps"]["2"]["status"] == "failed"
    assert out["steps"]["2"]["error"].startswith("timed out after 0.5 s")
    assert [c["step"] for c in abandoned_calls() if c["tool"] == "stubborn"] == [2]


@tool
async def raises_cancelled() -> str:
    """An async tool that raises CancelledError of its own accord."""
    raise asyncio.CancelledError


@tool
def raises_exit() -> str:
    """A sync tool that raises SystemExit."""
    raise SystemExit(3)


@tool
async def stops_its_loop() -> str:
    """An async tool that stops the event loop it runs on."""
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.2)
    return "unreachable"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tools_that_cancel_exit_or_stop_their_loop_fail_only_their_own_step(use_models, ctx, mode):
    plan = plan_of(
        step(1, "raises_cancelled"),
        step(2, "raises_exit"),
        step(3, "stops_its_loop"),
        step(4, "async_sleep_for", {"seconds": 0.3}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    hostile = ToolRegistry([raises_cancelled, raises_exit, stops_its_loop, async_sleep_for])
    graph = build_graph(checkpointer=InMemorySaver(), tools=hostile)
    config, context = thread(), ctx(max_replans=0, step_max_attempts=1)
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=context)
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    else:

        async def go() -> dict[str, Any]:
            await graph.ainvoke({"task": "t"}, config, context=context)
            approve = Command(resume={"action": "approve"})
            return await graph.ainvoke(approve, config, context=context)

        out = asyncio.run(go())
    steps = out["steps"]
    assert steps["1"]["error"] == "the tool raised CancelledError"
    assert steps["2"]["error"] == "the tool raised SystemExit"
    assert steps["3"]["status"] == "failed" and "Event loop stopped" in steps["3"]["error"]
    assert steps["4"]["status"] == "succeeded"
    assert out["final"]["status"] == "partial"


def test_threads_left_by_abandoned_calls_are_daemons():
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("planexec-tool"))


@pytest.mark.server
def test_on_the_server_an_async_tool_that_blocks_its_loop_stalls_no_other_step(tmp_path):
    import json

    from langgraph_sdk import get_client

    from tests.helpers import ROOT
    from tests.servers import langgraph_dev

    config = tmp_path / "langgraph.json"
    graph_file = ROOT / "tests" / "integration" / "fault_graph.py"
    config.write_text(
        json.dumps({"dependencies": [str(ROOT)], "graphs": {"faults": f"{graph_file}:graph"}})
    )
    plan = plan_of(
        step(1, "blocks_loop", {"seconds": 1.5}),
        step(2, "async_sleep_for", {"seconds": 0.1, "label": "a"}),
        step(3, "async_sleep_for", {"seconds": 0.1, "label": "b"}, [2]),
    )
    script = tmp_path / "planner.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}]))
    context = {"planner_model": f"scripted:{script}"}  # each thread has its own folder

    async def scenario(url: str) -> dict[str, Any]:
        client = get_client(url=url)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "faults", input={"task": "t"}, context=context)
        approve = {"resume": {"action": "approve"}}
        return await client.runs.wait(tid, "faults", command=approve, context=context)

    server_env = {"PLANEXEC_WORKSPACE_ROOT": str(tmp_path / "root")}
    with langgraph_dev(tmp_path / "langgraph-dev.log", server_env, config=config) as url:
        out = asyncio.run(scenario(url))
    first, second, third = (out["steps"][i]["output"] for i in "123")
    assert first["end"] - first["start"] >= 1.5
    assert third["end"] < first["end"] - 0.5, (first, second, third)
