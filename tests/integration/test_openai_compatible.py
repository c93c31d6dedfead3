"""The real model path: ``openai:MODEL`` through langchain-openai against a local
OpenAI-compatible server (what Ollama, vLLM or llama.cpp provide), found by OPENAI_BASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, step, thread
from tests.openai_server import serve, tool_call_message

PLAN = plan_of(
    step(1, "echo", {"text": "from a local server"}),
    {**step(2, None, {"about": "$1"}, [1], expected="one sentence"), "tools": ["echo"]},
    step(3, None, {"about": "$2"}, [2], expected="one sentence"),
)

VERDICTS = {
    "verdicts": [{"step": 1, "ok": True}, {"step": 2, "ok": True}, {"step": 3, "ok": False}]
}


def answer(body: dict) -> dict:
    """The planner gets PLAN, the judge VERDICTS, an executor model a sentence."""
    choice = body.get("tool_choice")
    offered = {t["function"]["name"] for t in body.get("tools", [])}
    if isinstance(choice, dict) and choice["function"]["name"] == "Plan":
        return tool_call_message("Plan", PLAN)
    if choice == "required" and offered == {"Verdicts"}:  # the judge
        return tool_call_message("Verdicts", VERDICTS)
    return {"role": "assistant", "content": "The text came from a local server."}


@pytest.fixture
def openai_server() -> Iterator[tuple[str, list[dict]]]:
    with serve(answer, refuses_stream=lambda body: body["model"].startswith("nostream-")) as (
        url,
        requests,
    ):
        yield url, requests


def test_openai_models_through_a_local_compatible_server(openai_server, monkeypatch, workspace):
    url, requests = openai_server
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    ctx = Context(
        planner_model="openai:local-planner",
        executor_model="openai:local-executor",
        shared_folder="ws",
    )
    config = thread()
    events = list(
        graph.stream({"task": "say where this runs"}, config, context=ctx, stream_mode="custom")
    )
    assert [e["index"] for e in events if e.get("event") == "plan_step"] == [1, 2, 3]
    asked = {"__interrupt__": graph.get_state(config).interrupts}
    assert asked["__interrupt__"][0].value["plan"]["steps"][0]["tool"] == "echo"
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == "The text came from a local server."
    assert [r["model"] for r in requests] == ["local-planner", "local-executor", "local-executor"]
    assert requests[0]["stream"] is True  # the plan streams as it is written
    assert all(r["path"] == "/v1/chat/completions" for r in requests)
    assert requests[0]["auth"] == "Bearer local-key-not-secret"
    assert {t["function"]["name"] for t in requests[1]["tools"]} == {"echo"}  # step 2's tools
    assert "tools" not in requests[2]  # step 3 lists none: the model is offered none
    usage = graph.get_state(config).values["usage"]
    assert usage["planner"] == {"calls": 1, "input_tokens": 123, "output_tokens": 45}


def local_models() -> Context:
    """A run context whose three models are the local server's, the LLM judge on."""
    return Context(
        planner_model="openai:local-planner",
        executor_model="openai:local-executor",
        evaluator_model="openai:local-judge",
        llm_judge=True,
        max_replans=0,
        shared_folder="ws",
    )


def judged_run(url: str, monkeypatch, callbacks: list | None = None) -> tuple[dict, dict]:
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    ctx = local_models()
    config = {**thread(), "callbacks": callbacks or []}
    graph.invoke({"task": "say where this runs"}, config, context=ctx)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
    return out, graph.get_state(config).values["usage"]


def test_the_judge_answers_with_structured_verdicts_over_the_wire(
    openai_server, monkeypatch, workspace
):
    url, requests = openai_server
    out, usage = judged_run(url, monkeypatch)
    judged = [r for r in requests if r["model"] == "local-judge"]
    assert len(judged) == 2  # the rejected step is run again once, then judged again
    assert judged[0]["tool_choice"] == "required"  # with_structured_output's function calling
    assert [t["function"]["name"] for t in judged[0]["tools"]] == ["Verdicts"]
    assert out["steps"]["3"]["error"] == "judge: does not fit"
    assert out["final"]["status"] == "partial"
    assert usage["planner"] == {"calls": 1, "input_tokens": 123, "output_tokens": 45}


def test_a_provider_models_own_call_reports_to_no_callback(openai_server, monkeypatch, workspace):
    from langchain_core.tracers.base import BaseTracer

    class Names(BaseTracer):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def _persist_run(self, run) -> None:
            pass

        def _on_run_update(self, run) -> None:
            self.names.append(run.name)

    url, _ = openai_server
    tracer = Names()
    _, usage = judged_run(url, monkeypatch, [tracer])
    assert "ScrubbedChatModel" in tracer.names and "ChatOpenAI" not in tracer.names
    assert usage["evaluator"] == {"calls": 2, "input_tokens": 246, "output_tokens": 90}


def test_a_server_that_cannot_stream_still_plans(openai_server, monkeypatch, workspace):
    """A server that answers a streamed request with plain JSON: asked once more, unstreamed."""
    url, requests = openai_server
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    ctx = Context(planner_model="openai:nostream-planner", shared_folder="ws")
    events = list(graph.stream({"task": "t"}, thread(), context=ctx, stream_mode="custom"))
    assert [bool(r.get("stream")) for r in requests] == [True, False]
    assert [e["index"] for e in events if e.get("event") == "plan_step"] == [1, 2, 3]


def pinned_local(url: str, **options: object) -> Any:
    """The user's own ``init_chat_model`` instance of a local server, as ``models=`` gets it."""
    from langchain.chat_models import init_chat_model

    return init_chat_model(
        "openai:local-planner", base_url=url, api_key="local-key-not-secret", **options
    )


def test_a_pinned_local_openai_model_counts_its_tokens(openai_server, monkeypatch, workspace):
    """A pinned ChatOpenAI with a custom base_url is asked for its streamed usage, as planexec's
    own ``openai:`` specs are: the run counts the server's tokens, and budgets hold."""
    url, requests = openai_server
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = pinned_local(url)
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), models={"planner": model}
    )
    config = thread()
    graph.invoke({"task": "say where this runs"}, config, context=Context(shared_folder="ws"))
    assert requests[0]["stream"] is True
    assert requests[0]["stream_options"] == {"include_usage": True}
    usage = graph.get_state(config).values["usage"]
    assert usage["planner"] == {"calls": 1, "input_tokens": 123, "output_tokens": 45}
    assert model.stream_usage is None  # the user's instance is left as it was

    budgeted = build_graph(
        checkpointer=InMemorySaver(),
        tools=ToolRegistry([echo]),
        models={"planner": model},
        approval="never",
    )
    ctx = Context(shared_folder="ws", approval="never", max_tokens=100)
    out = budgeted.invoke({"task": "say where this runs"}, thread(), context=ctx)
    assert out["final"]["budget"] == {"budget": "tokens", "limit": 100, "spent": 168}, out["final"]
    assert out["final"]["status"] != "succeeded"
    assert "executor" not in out["usage"]  # no model step was called past the budget
    assert [r["model"] for r in requests[1:]] == ["local-planner"]


def test_a_pinned_model_that_turns_streamed_usage_off_keeps_it_off(
    openai_server, monkeypatch, workspace
):
    """An explicit ``stream_usage=False`` is the user's choice: the run still plans."""
    url, requests = openai_server
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    graph = build_graph(
        checkpointer=InMemorySaver(),
        tools=ToolRegistry([echo]),
        models={"planner": pinned_local(url, stream_usage=False)},
    )
    config = thread()
    graph.invoke({"task": "say where this runs"}, config, context=Context(shared_folder="ws"))
    assert "stream_options" not in requests[0]
    assert graph.get_state(config).interrupts  # the plan came, without token counts
