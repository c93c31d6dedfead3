"""planexec's one background loop: how a sync run stops, what may not wait on it, forks, exits.

Each node is one coroutine; a sync run (``invoke``) runs it on the background loop, which also
serves the provider clients and the MCP sessions. These check, as a user drives them: Ctrl-C
stops a sync run at once (no later step starts, none runs twice on resume); a tool marked
``runs_on_loop`` that waits on a sync API of planexec fails its step with a clear error and
leaves the loop serving every later run; a forked child runs; an exit raised by a model's code
fails the call, the same way on sync and async runs; a call's leftover tasks are cancelled, a
task started as ``unowned`` is not.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.concurrency import background
from planexec.errors import is_transient
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import ToolRegistry
from tests.helpers import plan_of, plan_reply, scripted, step, thread

STARTED: list[int] = []


@tool
def slow(n: int) -> int:
    """Wait a while, then give n + 1."""
    STARTED.append(n)
    time.sleep(1.0)
    return n + 1


def test_ctrl_c_stops_a_sync_run_at_once_and_no_later_step_starts(use_models, ctx):
    STARTED.clear()
    plan = plan_of(step(1, "slow", {"n": 1}), step(2, "slow", {"n": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]))
    config, context = thread(), ctx(max_replans=0)
    request = graph.invoke({"task": "t"}, config, context=context)["__interrupt__"][0].value
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))  # Ctrl-C
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        answer = {"action": "approve", "digest": request["digest"]}
        graph.invoke(Command(resume=answer), config, context=context)
    assert time.monotonic() - started < 1.0  # before: 2 s, the whole round ran on
    time.sleep(1.5)  # step 1's call ends in its thread; step 2 must not start
    assert STARTED == [1]


@tool
async def waits_on_planexec(how: str) -> str:
    """Wait on a sync API of planexec: a nested graph's invoke, or what an MCP tool's sync call
    does (not allowed on the loop)."""
    if how == "graph":
        return str(build_graph(tools=ToolRegistry([])).invoke({"task": "nested"}))
    return str(background.wait(asyncio.sleep(0, "an MCP tool's sync call")))


@pytest.mark.parametrize("how", ["graph", "mcp"])
def test_a_tool_on_the_loop_that_waits_on_a_sync_api_fails_its_step_and_the_loop_serves_on(
    use_models, ctx, how
):
    plan = plan_of(step(1, "waits_on_planexec", {"how": how}))
    use_models(planner=scripted(plan_reply(plan)))
    registry = ToolRegistry()
    registry.register(waits_on_planexec, runs_on_loop=True)
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry, approval="never")
    started = time.monotonic()
    out = graph.invoke({"task": "t"}, thread(), context=ctx(max_replans=0, step_timeout=5))
    assert time.monotonic() - started < 4  # refused at once (before: "mcp" hung the loop)
    assert out["steps"]["1"]["status"] == "failed"
    assert "background loop cannot wait for itself" in out["steps"]["1"]["error"]

    async def still_serving() -> str:
        return "served"

    assert background.run_blocking(still_serving) == "served"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_after_its_parent_did(use_models, ctx):
    plan = plan_of(step(1, "slow", {"n": 0}))
    use_models(planner=scripted(plan_reply(plan), plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]), approval="never")
    assert graph.invoke({"task": "t"}, thread(), context=ctx())["final"]["status"] == "succeeded"
    pid = os.fork()
    if pid == 0:  # the child: its parent's loop and workers did not come along
        code = 1
        try:
            done = threading.Event()
            result: list[Any] = []

            def run() -> None:
                result.append(graph.invoke({"task": "t"}, thread(), context=ctx()))
                done.set()

            threading.Thread(target=run, daemon=True).start()
            code = 0 if done.wait(20) and result[0]["final"]["status"] == "succeeded" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # before: the child hung (status 2)


class ExitingModel(ScriptedChatModel):
    """A planner model whose own code raises an exit."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise SystemExit(3)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_exit_raised_by_a_models_code_fails_the_call_the_same_way_sync_and_async(
    use_models, ctx, mode
):
    use_models(planner=ExitingModel(replies=[]))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]))
    config = thread()
    with pytest.raises(Exception, match="the model's call raised SystemExit"):
        if mode == "sync":
            graph.invoke({"task": "t"}, config, context=ctx())
        else:
            asyncio.run(graph.ainvoke({"task": "t"}, config, context=ctx()))


def test_a_calls_leftovers_are_cancelled_and_an_unowned_task_is_not():
    kept: dict[str, asyncio.Task[Any]] = {}

    async def forever() -> None:
        await asyncio.sleep(3600)

    async def call() -> None:
        owned = background.own_tasks()
        kept["left"] = asyncio.get_running_loop().create_task(forever())
        kept["session"] = background.unowned(forever())
        background.tidy(owned)
        await asyncio.sleep(0.05)

    background.run_blocking(call)
    assert kept["left"].cancelled()
    assert not kept["session"].done()
    background.loop().call_soon_threadsafe(kept["session"].cancel)


class ApiError(Exception):
    """Stands for a client's error sent inside a 200 reply (matched by name)."""

    def __init__(self, body: Any) -> None:
        super().__init__(str(body))
        self.body = body


ApiError.__name__ = "APIError"


@pytest.mark.parametrize(
    ("words", "transient"),
    [
        ("Could not generate a response", False),
        ("temperature must be separate from top_p", False),
        ("moderate content", False),
        ("Server overloaded, try later", True),
        ("rate limit reached", True),
        ("model not found on this server", False),
        ("Invalid API key for this server", False),
        ("a first-rate answer", False),
        ("Request timed out", True),
        ("Too many requests", True),
        ("ratelimit reached", True),
        ({"message": "server overloaded"}, True),
        ({"error": {"message": "Rate limit reached"}}, True),
        ({"error": {"code": "invalid_request_error", "message": "bad"}}, False),
    ],
)
def test_only_whole_words_make_an_error_in_a_200_reply_transient(words, transient):
    assert is_transient(ApiError(words)) is transient


def _approved_stream(graph: Any, config: Any, context: Any) -> Any:
    request = graph.invoke({"task": "t"}, config, context=context)["__interrupt__"][0].value
    answer = {"action": "approve", "digest": request["digest"]}
    return graph.stream(Command(resume=answer), config, context=context, stream_mode="custom")


def test_closing_a_sync_stream_stops_the_run_at_once(use_models, ctx):
    STARTED.clear()
    plan = plan_of(step(1, "slow", {"n": 1}), step(2, "slow", {"n": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]))
    stream = _approved_stream(graph, thread(), ctx(max_replans=0))
    for event in stream:
        if event.get("event") == "step_started":
            break
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 0.5  # before: the round ran on (2 s)
    time.sleep(1.5)
    assert STARTED == [1]


def test_ctrl_c_while_a_sync_stream_is_read_stops_the_run_at_once(use_models, ctx):
    STARTED.clear()
    plan = plan_of(step(1, "slow", {"n": 1}), step(2, "slow", {"n": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]))
    stream = _approved_stream(graph, thread(), ctx(max_replans=0))
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        for _ in stream:
            pass
    assert time.monotonic() - started < 1.0  # before: 2 s, the whole round ran on
    time.sleep(1.5)
    assert STARTED == [1]


def test_ctrl_c_after_the_plan_streamed_stops_its_steps_and_a_resume_runs_none_twice(
    use_models, ctx
):
    STARTED.clear()
    plan = plan_of(step(1, "slow", {"n": 1}), step(2, "slow", {"n": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]), approval="never")
    config = thread()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):  # steps start in the planner, as the plan streams
        graph.invoke({"task": "t"}, config, context=ctx(max_replans=0))
    assert time.monotonic() - started < 1.5  # before: 2 s, both steps ran
    time.sleep(1.0)
    assert STARTED == [1]


def test_ctrl_c_stops_a_run_read_a_part_at_a_time_in_fresh_contexts_and_under_your_handler(
    use_models, ctx
):
    # a server reads a sync stream one part per call, each in a context of its own; your own
    # SIGINT handler raises; another run's stream is left open: Ctrl-C still stops this run
    STARTED.clear()
    plan = plan_of(step(1, "slow", {"n": 1}), step(2, "slow", {"n": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan), plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([slow]))
    context = ctx(max_replans=0)
    before = signal.getsignal(signal.SIGINT)
    kept = _approved_stream(graph, thread(), context)  # another run, left open
    next(kept)

    def mine(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("mine")

    ours = signal.signal(signal.SIGINT, mine)  # planexec's, watching the open run
    try:
        stream = _approved_stream(graph, thread(), context)
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt, match="mine"):
            while True:
                contextvars.copy_context().run(next, stream)
        assert time.monotonic() - started < 1.0
        time.sleep(1.5)
        assert STARTED.count(2) == 0  # the second step of neither run started
        kept.close()
        assert signal.getsignal(signal.SIGINT) is mine  # your handler, once no run is left
    finally:
        kept.close()
        signal.signal(signal.SIGINT, before)
    signal.signal(signal.SIGINT, ours)  # someone puts planexec's back after the runs ended:
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is still a KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    signal.signal(signal.SIGINT, before)
