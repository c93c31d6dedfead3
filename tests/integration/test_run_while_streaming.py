"""With approval ``never``, a step starts while the planner is still writing the plan.

A step whose line is complete and valid, and whose dependencies have started, runs before the
model has finished; the rest of the plan runs once the whole plan is valid. With any policy that
asks a human, nothing runs before the approval. Every step runs once, resumed runs included.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import PrivateAttr

from planexec import Context, build_graph
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import ToolRegistry
from tests.helpers import plan_reply, text_reply

CALLS: list[str] = []
CALLED = threading.Event()


@tool
def mark(text: str) -> str:
    """Record a call and return the text."""
    CALLS.append(text)
    CALLED.set()
    return text.upper()


# compact, as the planner writes it: step 2 uses step 1's output, step 4 waits for the model step
PLAN = {
    "goal": "mark things",
    "steps": [
        {"mark": {"text": "a"}},
        {"mark": {"text": "b after ${1}"}},
        {"description": "say something about $2", "args": {"x": "$2"}},
        {"mark": {"text": "d after ${3}"}},
        {"mark": {"text": "e"}},
    ],
}


class Streamed(ScriptedChatModel):
    """A scripted model whose streamed reply a subclass delivers its own way (``deliver``)."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self.deliver(list(super()._stream(messages, stop, run_manager, **kwargs)))

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        yield from chunks


class HeldModel(Streamed):
    """Streams its plan, and holds the last quarter back until a tool was called (or timeout)."""

    hold_seconds: float = 10.0
    _held: list[bool] = PrivateAttr(default_factory=list)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        yield from chunks[: len(chunks) * 3 // 4]
        self._held.append(CALLED.wait(timeout=self.hold_seconds))
        yield from chunks[len(chunks) * 3 // 4 :]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    CALLS.clear()
    CALLED.clear()
    yield


def graph_for(policy: str, planner: ScriptedChatModel) -> Any:
    executor = ScriptedChatModel(replies=[text_reply("MODEL SAYS HI", match="say something")])
    return build_graph(
        InMemorySaver(),
        tools=ToolRegistry([mark]),
        approval=policy,  # type: ignore[arg-type]
        models={"planner": planner, "executor": executor},
    )


def run(graph: Any, config: dict[str, Any], value: Any, asynchronous: bool) -> Any:
    context = Context(approval="never")  # the operator's and the run's policy: no one asks
    if asynchronous:
        return asyncio.run(graph.ainvoke(value, config, context=context))
    return graph.invoke(value, config, context=context)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_with_approval_never_steps_start_while_the_plan_streams(
    tmp_path, monkeypatch, asynchronous
):
    monkeypatch.chdir(tmp_path)
    planner = HeldModel(replies=[plan_reply(PLAN)], stream_chunk_chars=8)
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"n-{asynchronous}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous)

    assert planner._held == [True]  # a tool ran before the model had written the whole plan
    assert sorted(CALLS) == ["a", "b after A", "d after MODEL SAYS HI", "e"]  # each once
    state = graph.get_state(config).values
    assert {k: r["status"] for k, r in state["steps"].items()} == {
        "1": "succeeded",
        "2": "succeeded",
        "3": "succeeded",
        "4": "succeeded",
        "5": "succeeded",
    }
    assert state["plan"]["version"] == 1
    assert state["approved"]["by"] == "policy"
    assert "MODEL SAYS HI" in str(result)


@pytest.mark.parametrize("policy", ["first", "always"])
def test_with_a_human_to_ask_nothing_runs_before_the_approval(tmp_path, monkeypatch, policy):
    monkeypatch.chdir(tmp_path)
    planner = HeldModel(replies=[plan_reply(PLAN)], stream_chunk_chars=8, hold_seconds=1.0)
    graph = graph_for(policy, planner)
    config = {"configurable": {"thread_id": f"f-{policy}"}}
    first = graph.invoke({"task": "mark things"}, config, context=Context(approval="never"))
    assert planner._held == [False]  # no tool was called while the plan streamed
    assert CALLS == []
    assert first["__interrupt__"]
    pending = first["__interrupt__"][0].value
    answer = {"action": "approve", "version": pending["version"], "digest": pending["digest"]}
    graph.invoke(Command(resume=answer), config)
    assert sorted(CALLS) == ["a", "b after A", "d after MODEL SAYS HI", "e"]


class DroppedOnce(Streamed):
    """Streams its plan; the first time, the connection drops once step 1 has run."""

    _drops: list[bool] = PrivateAttr(default_factory=list)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        if not self._drops:
            self._drops.append(True)
            yield from chunks[: len(chunks) // 2]
            CALLED.wait(timeout=10)
            raise ConnectionError("the connection dropped mid-reply")
        yield from chunks


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_reply_cut_off_after_steps_started_is_asked_again_and_no_step_runs_twice(
    tmp_path, monkeypatch, asynchronous
):
    monkeypatch.chdir(tmp_path)
    planner = DroppedOnce(replies=[plan_reply(PLAN, match=".")], stream_chunk_chars=8)
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"d-{asynchronous}"}}
    run(graph, config, {"task": "mark things"}, asynchronous)
    assert planner._drops == [True]
    assert sorted(CALLS) == ["a", "b after A", "d after MODEL SAYS HI", "e"]  # each once
    state = graph.get_state(config).values
    assert all(r["status"] == "succeeded" for r in state["steps"].values())


class AlwaysDropped(Streamed):
    """Streams half its plan, then fails: each time, after step 1 has run."""

    error: str = "connection"
    _calls: list[bool] = PrivateAttr(default_factory=list)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        self._calls.append(True)
        yield from chunks[: len(chunks) // 2]
        CALLED.wait(timeout=10)
        if self.error == "connection":
            raise ConnectionError("the connection dropped mid-reply")
        raise ValueError("the provider sent garbage")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("error", ["connection", "garbage"])
def test_a_model_that_keeps_failing_after_steps_started_ends_the_run_with_them_recorded(
    tmp_path, monkeypatch, asynchronous, error
):
    monkeypatch.setattr("planexec.execution.streaming.REDRAFT_WAIT", 0.0)
    monkeypatch.chdir(tmp_path)
    planner = AlwaysDropped(replies=[plan_reply(PLAN, match=".")], stream_chunk_chars=8)
    planner.error = error
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"k-{asynchronous}-{error}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous)  # no exception
    assert CALLS == ["a", "b after A"]  # the half written: each once (no retry of the node)
    assert len(planner._calls) == (3 if error == "connection" else 1)
    state = graph.get_state(config)
    assert not state.next  # the run ended; the thread takes a new task
    assert (
        "no valid plan in 1 attempt: the planner model failed after steps had started"
        in result["final"]["answer"]
    )
    (revision,) = state.values["revisions"]
    assert [s["args"] for s in revision["plan"]["steps"]] == [
        {"text": "a"},
        {"text": "b after ${1}"},
    ]
    assert {k: r["status"] for k, r in revision["outcomes"].items()} == {
        "1": "succeeded",
        "2": "succeeded",
    }


class FailsBeforeAnyStep(Streamed):
    """The first time, fails before any step's line is complete; then streams its plan."""

    _failed: list[bool] = PrivateAttr(default_factory=list)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        if not self._failed:
            self._failed.append(True)
            yield from chunks[:2]
            raise ValueError("the provider sent garbage")
        yield from chunks


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_run_resumed_under_a_stricter_policy_before_any_step_started_asks_first(
    tmp_path, monkeypatch, asynchronous
):
    # started under never, the planner failed before any step had started: a resume that asks
    # for approval "always" gets it, nothing runs before the human answers
    monkeypatch.chdir(tmp_path)
    planner = FailsBeforeAnyStep(replies=[plan_reply(PLAN, match=".")], stream_chunk_chars=8)
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"s-{asynchronous}"}}
    with pytest.raises(ValueError, match="garbage"):
        run(graph, config, {"task": "mark things"}, asynchronous)
    strict = Context(approval="always")
    if asynchronous:
        out = asyncio.run(graph.ainvoke(None, config, context=strict))
    else:
        out = graph.invoke(None, config, context=strict)
    assert out["__interrupt__"]
    assert CALLS == []


class KilledOnce(Streamed):
    """The first time, the user presses Ctrl-C (in the main thread) once step 1 has run."""

    _killed: list[bool] = PrivateAttr(default_factory=list)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        if not self._killed:
            self._killed.append(True)
            yield from chunks[: len(chunks) // 3]
            CALLED.wait(timeout=10)
            time.sleep(0.2)  # step 1's result is saved
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: the caller's wait is interrupted
            time.sleep(0.3)
            raise RuntimeError("the rest of this reply never comes: the process has gone")
        yield from chunks


def test_a_stricter_resume_replays_only_what_had_finished_even_with_a_remembered_plan(
    tmp_path, monkeypatch
):
    # thread 1 dies after step 1 ran; thread 2 then completes the same task, which leaves a
    # template in plan memory; thread 1 resumed under "always" finds step 1 again (not from
    # memory, which would run it twice), starts nothing else, and says what already ran
    monkeypatch.chdir(tmp_path)
    planner = KilledOnce(replies=[plan_reply(PLAN, match=".")], stream_chunk_chars=8)
    executor = ScriptedChatModel(replies=[text_reply("MODEL SAYS HI", match="say something")])
    graph = build_graph(
        InMemorySaver(),
        store=InMemoryStore(),
        tools=ToolRegistry([mark]),
        approval="never",
        models={"planner": planner, "executor": executor},
    )
    never = Context(approval="never", plan_memory=True)
    first, second = {"configurable": {"thread_id": "t1"}}, {"configurable": {"thread_id": "t2"}}
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"task": "mark things"}, first, context=never)
    assert CALLS == ["a"]
    assert graph.invoke({"task": "mark things"}, second, context=never)["final"]["status"] == (
        "succeeded"
    )
    CALLS.clear()
    out = graph.invoke(None, first, context=Context(approval="always", plan_memory=True))
    request = out["__interrupt__"][0].value
    assert CALLS == []  # step 1 replayed, nothing else started
    assert request["already_ran"] == {"1": "succeeded"}
    assert "Already ran, before this approval: step 1 (succeeded)." in request["description"]
    answer = {"action": "approve", "version": request["version"], "digest": request["digest"]}
    graph.invoke(Command(resume=answer), first, context=Context(approval="always"))
    assert sorted(CALLS) == ["b after A", "d after MODEL SAYS HI", "e"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_step_given_its_argument_bare_starts_while_the_plan_streams(
    tmp_path, monkeypatch, asynchronous
):
    monkeypatch.chdir(tmp_path)
    short = {"steps": [{"mark": "a"}, {"mark": "${1} again"}, {"mark": "c"}, {"mark": "d"}]}
    planner = HeldModel(replies=[plan_reply(short)], stream_chunk_chars=4)
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"bare-{asynchronous}"}}
    result = run(graph, config, {"task": "mark a few"}, asynchronous)

    assert planner._held == [True]  # a tool ran before the model had written the whole plan
    assert sorted(CALLS) == ["A again", "a", "c", "d"]
    assert result["final"]["status"] == "succeeded", result["final"]
    assert graph.get_state(config).values["plan"]["goal"] == "mark a few"
