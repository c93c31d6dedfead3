"""The plan's steps reach the ``custom`` stream as the planner model writes them.

Each complete step goes out once as a ``plan_step`` event (scrubbed, storable), before the
model has finished the plan; the whole plan is still validated before the approval.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from planexec import build_graph
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, step

PLAN = plan_of(
    step(1, "echo", {"text": "a"}),
    step(2, "echo", {"text": "b, then ${1}"}, [1]),
    step(3, "echo", {"text": "c"}),
)


class HeldModel(ScriptedChatModel):
    """Streams its reply, and holds the second half back until the first step was seen."""

    _seen: threading.Event = PrivateAttr(default_factory=threading.Event)
    _held: list[bool] = PrivateAttr(default_factory=list)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        chunks = list(super()._stream(messages, stop, run_manager, **kwargs))
        yield from chunks[: len(chunks) * 3 // 4]
        self._held.append(self._seen.wait(timeout=20))  # the client saw a step mid-reply
        yield from chunks[len(chunks) * 3 // 4 :]


def planner(*replies: Any) -> HeldModel:
    return HeldModel(replies=list(replies), stream_chunk_chars=12)


def graph_with(model: ScriptedChatModel) -> Any:
    return build_graph(InMemorySaver(), tools=ToolRegistry([echo]), models={"planner": model})


def plan_steps(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict) and e.get("event") == "plan_step"]


def check(events: list[Any], model: HeldModel, final: dict[str, Any]) -> None:
    shown = plan_steps(events)
    assert [(e["by"], e["draft"], e["index"]) for e in shown] == [
        ("planner", 1, 1),
        ("planner", 1, 2),
        ("planner", 1, 3),
    ]
    assert [e["written"] for e in shown] == PLAN["steps"]
    assert model._held == [True]  # a step reached the client before the model had finished
    written = [{**s, "tools": []} for s in PLAN["steps"]]  # the artifact fills in the default
    assert final["__interrupt__"][0].value["plan"]["steps"] == written


def test_steps_stream_while_the_planner_writes_sync(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = planner(plan_reply(PLAN))
    graph, events = graph_with(model), []
    config = {"configurable": {"thread_id": "s"}}
    for mode, chunk in graph.stream({"task": "t"}, config, stream_mode=["custom", "updates"]):
        if mode == "custom":
            events.append(chunk)
            model._seen.set()
    check(events, model, {"__interrupt__": graph.get_state(config).interrupts})


def test_steps_stream_while_the_planner_writes_async(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = planner(plan_reply(PLAN))
    graph, events = graph_with(model), []
    config = {"configurable": {"thread_id": "a"}}

    async def run() -> None:
        async for mode, chunk in graph.astream(
            {"task": "t"}, config, stream_mode=["custom", "updates"]
        ):
            if mode == "custom":
                events.append(chunk)
                model._seen.set()

    asyncio.run(run())
    check(events, model, {"__interrupt__": graph.get_state(config).interrupts})


def test_a_repaired_draft_streams_again_and_a_model_that_cannot_stream_still_shows_steps(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    bad = plan_of(step(1, "no_such_tool", {}), step(2, "echo", {"text": "x"}))
    model = ScriptedChatModel(replies=[plan_reply(bad), plan_reply(PLAN)])  # whole replies
    graph = graph_with(model)
    events = [
        chunk
        for chunk in graph.stream(
            {"task": "t"}, {"configurable": {"thread_id": "r"}}, stream_mode="custom"
        )
    ]
    shown = [(e["draft"], e["index"]) for e in plan_steps(events)]
    assert shown == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]


@pytest.mark.parametrize("chunk_chars", [5, 1000])
def test_streamed_steps_are_scrubbed_and_storable(tmp_path, monkeypatch, chunk_chars):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SERVICE_API_KEY", "sk-live-0123456789abcdef")
    hostile = plan_of(
        step(1, "echo", {"text": "key sk-live-0123456789abcdef", "n": 10**30}),
        step(2, "echo", {"text": "x" * 30_000}),  # too big to preview: the approval shows it
        step(3, "echo", {"text": "[/] \u0000 \ud800 ok"}),
    )
    model = ScriptedChatModel(  # the same reply to every repair request: the plan stays invalid
        replies=[plan_reply(hostile, match=".")], stream_chunk_chars=chunk_chars
    )
    graph = graph_with(model)
    events = list(
        graph.stream({"task": "t"}, {"configurable": {"thread_id": "h"}}, stream_mode="custom")
    )
    shown = {e["index"]: e["written"] for e in plan_steps(events) if e["draft"] == 1}
    assert sorted(shown) == [1, 3]
    assert "sk-live" not in repr(events)
    assert shown[1]["args"]["text"] == "key [redacted]"
    assert shown[1]["args"]["n"] == str(10**30)  # beyond 64 bits: text, as state would keep it


def test_a_failing_preview_never_fails_the_planner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("preview bug")

    monkeypatch.setattr("planexec.drafting.preview.redact", broken)
    model = ScriptedChatModel(replies=[plan_reply(PLAN)], stream_chunk_chars=10)
    graph = graph_with(model)
    config = {"configurable": {"thread_id": "p"}}
    events = list(graph.stream({"task": "t"}, config, stream_mode="custom"))
    assert plan_steps(events) == []
    assert graph.get_state(config).interrupts[0].value["plan"]["steps"][0]["id"] == 1


def test_previews_stop_after_the_cap(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("planexec.drafting.preview.MAX_PREVIEW_STEPS", 2)
    model = ScriptedChatModel(replies=[plan_reply(PLAN)], stream_chunk_chars=10)
    events = list(
        graph_with(model).stream(
            {"task": "t"}, {"configurable": {"thread_id": "c"}}, stream_mode="custom"
        )
    )
    assert [e["index"] for e in plan_steps(events)] == [1, 2]
