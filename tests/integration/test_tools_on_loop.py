"""Async tools whose author vouches they never block may run on the step's own event loop.

By default every tool call runs on a worker thread of its own (a tool that blocks stalls only
itself). A tool marked ``runs_on_loop`` skips that hop: it runs on the loop that runs the
steps, as LangGraph's ``ToolNode`` runs async tools. Its time limit, the count of abandoned
calls, the scrubbing of its output and failures, and its errors all hold as for any tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.types import Command

from planexec import build_graph
from planexec.concurrency.abandoned import abandoned_calls
from planexec.concurrency.toolcalls import RUNS_ON_LOOP
from planexec.redaction.secrets import REDACTED
from planexec.tools import ToolRegistry
from tests.helpers import plan_of, plan_reply, scripted, step, thread

SECRET = "sk-onloop-0123456789abcdefghijklmnop"


@tool
async def where_on_loop(label: str) -> dict[str, Any]:
    """Say which thread and loop ran this call."""
    return {"thread": threading.current_thread().name, "loop": id(asyncio.get_running_loop())}


where_isolated = where_on_loop.model_copy(update={"name": "where_isolated"})


@tool
async def swallows_on_loop(seconds: float) -> str:
    """Work for `seconds` on the loop, ignoring cancellation (the misbehaviour under test)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(deadline - time.time())
    return "finished late"


@tool
async def raises_cancelled_on_loop() -> str:
    """Raise CancelledError from inside the call (nobody cancelled it)."""
    raise asyncio.CancelledError


@tool
async def leaks_on_loop(kind: str) -> Any:
    """Stream, return or raise the secret from the step's own loop."""
    get_stream_writer()({"on_loop_says": SECRET})
    if kind == "raise":
        raise ValueError(f"auth failed with {SECRET}")
    return {"key": SECRET}


@tool
def sync_tool(text: str) -> str:
    """A sync tool: it can only run on a thread."""
    return text


def registry() -> ToolRegistry:
    tools = ToolRegistry([where_isolated])
    for async_tool in (where_on_loop, swallows_on_loop, raises_cancelled_on_loop, leaks_on_loop):
        tools.register(async_tool, runs_on_loop=True)
    return tools


def run(graph: Any, context: Any, mode: str) -> tuple[dict[str, Any], list[Any], Any]:
    """Plan, approve and run to the end; return the final state, every custom event, and
    what the run looked like at its end: seconds taken and the calls then abandoned (async:
    before ``asyncio.run`` closes the loop, which waits for what is left on it)."""
    config = thread()
    events: list[Any] = []
    payloads = ({"task": "t"}, Command(resume={"action": "approve"}))
    started = time.time()
    if mode == "sync":
        for payload in payloads:
            events += graph.stream(payload, config, context=context, stream_mode="custom")
        return graph.get_state(config).values, events, (time.time() - started, abandoned_calls())

    async def go() -> tuple[dict[str, Any], Any]:
        for payload in payloads:
            async for chunk in graph.astream(
                payload, config, context=context, stream_mode="custom"
            ):
                events.append(chunk)
        at_end = (time.time() - started, abandoned_calls())
        return (await graph.aget_state(config)).values, at_end

    values, at_end = asyncio.run(go())
    return values, events, at_end


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_marked_runs_on_loop_runs_on_the_steps_loop_and_others_on_workers(
    use_models, ctx, mode
):
    plan = plan_of(
        step(1, "where_on_loop", {"label": "a"}),
        step(2, "where_isolated", {"label": "b"}),
        step(3, "where_on_loop", {"label": "c"}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    values, _, _ = run(graph, ctx(max_replans=0), mode)
    on_loop, isolated, again = (values["steps"][i]["output"] for i in "123")
    assert not on_loop["thread"].startswith("planexec-tool"), on_loop
    assert isolated["thread"].startswith("planexec-tool"), isolated
    assert on_loop["loop"] == again["loop"] != isolated["loop"]
    assert values["final"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_on_the_loop_that_swallows_cancellation_still_times_out_and_is_counted(
    use_models, ctx, mode
):
    plan = plan_of(
        step(1, "swallows_on_loop", {"seconds": 1.5}), step(2, "where_on_loop", {"label": "x"})
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    values, _, (seconds, left) = run(
        graph, ctx(step_timeout=0.4, step_max_attempts=3, max_replans=0), mode
    )
    assert seconds < 1.4, seconds  # nobody waited for the tool to give up
    first = values["steps"]["1"]
    assert first["status"] == "failed" and first["attempts"] == 1
    assert first["error"] == (
        "timed out after 0.4 s (the call did not stop: abandoned, still running)"
    )
    assert values["steps"]["2"]["status"] == "succeeded"
    assert [(c["tool"], c["step"]) for c in left] == [("swallows_on_loop", 1)]
    deadline = time.time() + 3
    while abandoned_calls() and time.time() < deadline:
        time.sleep(0.05)
    assert not abandoned_calls()  # it ended: no longer counted


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_on_the_loop_that_raises_cancelled_fails_only_its_step(use_models, ctx, mode):
    plan = plan_of(step(1, "raises_cancelled_on_loop"), step(2, "where_on_loop", {"label": "x"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    values, _, _ = run(graph, ctx(max_replans=0, step_max_attempts=1), mode)
    assert values["steps"]["1"]["error"] == "the tool raised CancelledError"
    assert values["steps"]["2"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_tool_on_the_loop_leaks_no_secret(use_models, ctx, monkeypatch, mode):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    plan = plan_of(
        step(1, "leaks_on_loop", {"kind": "return"}), step(2, "leaks_on_loop", {"kind": "raise"})
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    values, events, _ = run(graph, ctx(max_replans=0, step_max_attempts=1), mode)
    assert values["steps"]["1"]["output"] == {"key": REDACTED}
    assert values["steps"]["2"]["error"] == f"ValueError: auth failed with {REDACTED}"
    assert {"on_loop_says": REDACTED} in events
    assert SECRET not in repr(values) + repr(events)


def test_only_async_tools_may_run_on_the_loop():
    with pytest.raises(ValueError, match="sync_tool.*async"):
        ToolRegistry().register(sync_tool, runs_on_loop=True)
    marked = sync_tool.model_copy(update={"metadata": {RUNS_ON_LOOP: True}})
    with pytest.raises(ValueError, match="sync_tool.*async"):
        ToolRegistry([marked])


def test_only_true_marks_a_tool_to_run_on_the_loop(use_models, ctx):
    """A stray truthy value ("false", 1) is refused, not taken for a yes."""
    for value in ("false", 1, "yes"):
        marked = where_isolated.model_copy(update={"metadata": {RUNS_ON_LOOP: value}})
        with pytest.raises(ValueError, match="runs_on_loop"):
            ToolRegistry([marked])
    tools = ToolRegistry()
    tools.register(where_on_loop, runs_on_loop=True)
    tools.register(where_on_loop.model_copy(update={"name": "off"}), runs_on_loop=False)
    plan = plan_of(step(1, "off", {"label": "a"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    values, _, _ = run(graph, ctx(max_replans=0), "async")
    assert values["steps"]["1"]["output"]["thread"].startswith("planexec-tool")


class CustomAsyncTool(BaseTool):
    """An async tool written as a BaseTool subclass (its own ``_arun``)."""

    name: str = "custom_async"
    description: str = "Return at once."

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        return "ok"


def test_only_tools_made_from_an_async_function_may_run_on_the_loop():
    """The guard against exits escaping the loop wraps the tool's function: a subclass with its
    own ``_arun`` has none to wrap, so it is refused (it still runs, on a worker thread)."""
    with pytest.raises(ValueError, match="custom_async.*async function"):
        ToolRegistry().register(CustomAsyncTool(), runs_on_loop=True)
    assert "custom_async" in ToolRegistry([CustomAsyncTool()])


def test_a_mark_set_after_registration_leaves_the_tool_on_a_worker(use_models, ctx):
    """Only ``register`` makes a tool fit to run on the loop; editing its metadata later does
    not move it there."""
    tools = ToolRegistry([where_isolated])
    registered = tools.get("where_isolated")
    assert registered is not None
    registered.metadata = {RUNS_ON_LOOP: True}
    use_models(planner=scripted(plan_reply(plan_of(step(1, "where_isolated", {"label": "a"})))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    values, _, _ = run(graph, ctx(max_replans=0), "async")
    assert values["steps"]["1"]["output"]["thread"].startswith("planexec-tool")


@tool
async def reads_its_config(label: str, config: RunnableConfig) -> dict[str, Any]:
    """Say whether LangChain handed the tool a config, and which keys it has."""
    return {"label": label, "config_keys": sorted(config)}


def test_a_tool_on_the_loop_still_gets_its_config(use_models, ctx):
    """The guard keeps the function's signature: LangChain still passes ``config``."""
    tools = ToolRegistry()
    tools.register(reads_its_config, runs_on_loop=True)
    assert set(tools.get("reads_its_config").args) == {"label"}  # type: ignore[union-attr]
    use_models(planner=scripted(plan_reply(plan_of(step(1, "reads_its_config", {"label": "a"})))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    values, _, _ = run(graph, ctx(max_replans=0), "async")
    assert values["steps"]["1"]["status"] == "succeeded", values["steps"]["1"].get("error")
    assert "configurable" in values["steps"]["1"]["output"]["config_keys"]
