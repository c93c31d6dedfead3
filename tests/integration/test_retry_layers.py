"""One retry layer per kind of call, one definition of a transient error (issue 34).

* A model request that failed before any of its reply came is asked again by the model layer
  only (:mod:`planexec.llm.calls`: at most ``MAX_TRIES`` requests a call, after the provider's
  ``Retry-After``, within the call's deadline). What leaves that layer is never transient, so no
  node and no step asks the same request again.
* A tool call is attempted again by the step only (:mod:`planexec.execution.retries`): a
  transient error up to ``Context.step_max_attempts`` attempts, or ``1 + N`` with
  ``on_failure: {"retry": N}``, whichever is more.
* Both ask :func:`planexec.errors.is_transient`, the one classifier: an error that cannot pass
  (a spent quota, a prompt past the context length, a refused key) is not transient whoever
  raised it, and an error whose status may pass is transient whichever client raised it.

Through the real client (langchain-openai, openai, httpx) against the local OpenAI-compatible
server (``tests/openai_server.py``), and through ``graph.invoke`` with custom tools and models.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import Field

from planexec import Context, build_graph
from planexec import graph as graph_module
from planexec.errors import ModelCallError, ProviderError, TransientToolError, is_transient
from planexec.graph import MODEL_RETRY
from planexec.llm import calls as modelcalls
from planexec.llm.calls import MAX_TRIES
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import ToolRegistry
from tests.helpers import plan_of, plan_reply, scripted, step, thread
from tests.openai_server import Behaviour, Canned, serve

BUSY = Behaviour(
    status=503,
    headers={"Retry-After": "0"},
    error={"message": "The server is overloaded", "type": "server_error", "code": None},
)
QUOTA_SPENT = Behaviour(
    status=429,
    error={
        "message": "You exceeded your current quota",
        "type": "insufficient_quota",
        "code": "insufficient_quota",
    },
)


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model layer waits 10 ms between tries when the provider names no wait (same tries)."""
    monkeypatch.setattr(modelcalls, "FIRST_BACKOFF", 0.01)


def approve(graph: Any, config: dict[str, Any], context: Context) -> dict[str, Any]:
    """Plan, then approve the plan; return the state the run ends in."""
    first = graph.invoke({"task": "t"}, config, context=context)
    assert "__interrupt__" in first, first
    out: dict[str, Any] = graph.invoke(
        Command(resume={"action": "approve"}), config, context=context
    )
    return out


# --- model calls: the model layer alone asks a request again ------------------------------


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_an_always_busy_provider_gets_max_tries_requests_per_planner_run(
    monkeypatch, workspace, how
):
    with serve(Canned([]), behave=lambda body, n: BUSY) as (url, requests):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        graph = build_graph(checkpointer=InMemorySaver())
        context = Context(planner_model="openai:planner", shared_folder="ws")
        with pytest.raises(ProviderError, match=rf"overloaded \(after {MAX_TRIES} tries\)") as err:
            if how == "invoke":
                graph.invoke({"task": "t"}, thread(), context=context)
            else:
                asyncio.run(graph.ainvoke({"task": "t"}, thread(), context=context))
    assert len(requests) == MAX_TRIES
    assert not is_transient(err.value)  # nothing above the model layer asks again


class Unreachable(ScriptedChatModel):
    """A custom model whose every call fails like a dropped connection (a transient error)."""

    calls: list[int] = Field(default_factory=list, exclude=True)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        with LOCK:
            self.calls.append(len(self.calls) + 1)
        raise ConnectionError("the connection dropped")


LOCK = threading.Lock()


def test_a_custom_model_that_keeps_failing_gets_max_tries_calls_not_a_step_retry_each(
    use_models, ctx
):
    """The step's attempts are for the step's tools: a model call is asked again by the model
    layer alone, however many attempts the step may have."""
    executor = Unreachable(replies=[])
    plan = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))
    use_models(planner=scripted(plan_reply(plan)), executor=executor)
    graph = build_graph(checkpointer=InMemorySaver())
    out = approve(graph, thread(), ctx(step_max_attempts=5, max_replans=0))
    record = out["steps"]["1"]
    assert record["status"] == "failed"
    assert len(executor.calls) == MAX_TRIES, executor.calls
    assert record["attempts"] == 1
    assert f"the connection dropped (after {MAX_TRIES} tries)" in record["error"]


def test_a_custom_planner_that_keeps_failing_gets_max_tries_calls(use_models, ctx):
    planner = Unreachable(replies=[])
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver())
    with pytest.raises(ModelCallError, match=rf"dropped \(after {MAX_TRIES} tries\)") as err:
        graph.invoke({"task": "t"}, thread(), context=ctx())
    assert len(planner.calls) == MAX_TRIES
    assert not is_transient(err.value)


PLAN = plan_of(step(1, None, {"about": "x"}, expected="a sentence"))


class BreaksOff(ScriptedChatModel):
    """Streams the first pieces of its plan, then loses its connection: every time."""

    calls: list[int] = Field(default_factory=list, exclude=True)

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        with LOCK:
            self.calls.append(len(self.calls) + 1)
        yield from list(super()._stream(*args, **kwargs))[:3]
        raise ConnectionError("the connection dropped mid-reply")


def test_a_reply_that_breaks_off_is_not_asked_again_by_the_model_layer(
    use_models, ctx, monkeypatch
):
    """Part of the reply was shown (the plan's preview): the model layer does not send the same
    request again; the planner drafts anew, a new conversation, MODEL_RETRY's attempts in all."""
    conversations = MODEL_RETRY.max_attempts
    monkeypatch.setattr(graph_module, "MODEL_RETRY", MODEL_RETRY._replace(initial_interval=0.01))
    planner = BreaksOff(replies=[plan_reply(PLAN, match=".")], stream_chunk_chars=8)
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver())
    with pytest.raises(ModelCallError, match="after part of its reply had come") as err:
        graph.invoke({"task": "t"}, thread(), context=ctx())
    assert len(planner.calls) == conversations  # one request each, not MAX_TRIES each
    assert is_transient(err.value)  # a new conversation may pass


# --- tool calls: the step alone attempts a tool again -------------------------------------

ATTEMPTS: list[str] = []


@tool
def always_busy() -> str:
    """Fail the way a busy service does, every time."""
    ATTEMPTS.append("busy")
    raise TransientToolError("the service is busy")


def run_tool_step(use_models, ctx, tool_, on_failure: Any = None, **settings: Any) -> Any:
    ATTEMPTS.clear()
    planned = step(1, tool_.name)
    if on_failure is not None:
        planned["on_failure"] = on_failure
    use_models(planner=scripted(plan_reply(plan_of(planned))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([tool_]))
    return approve(graph, thread(), ctx(max_replans=0, **settings))["steps"]["1"]


@pytest.mark.parametrize("attempts", [1, 2, 4])
def test_a_tool_that_always_fails_transiently_is_attempted_step_max_attempts_times(
    use_models, ctx, attempts
):
    record = run_tool_step(use_models, ctx, always_busy, step_max_attempts=attempts)
    assert record["status"] == "failed"
    assert len(ATTEMPTS) == attempts == record["attempts"]


def test_on_failure_retry_adds_attempts_to_one_not_to_step_max_attempts(use_models, ctx):
    record = run_tool_step(use_models, ctx, always_busy, {"retry": 4}, step_max_attempts=3)
    assert len(ATTEMPTS) == 5 == record["attempts"]  # max(3, 1 + 4), not 3 + 4 nor 3 * 5


OPENAI_URL: list[str] = []


@tool
def ask_an_api() -> str:
    """Call an OpenAI-compatible API the way a tool's own client does (no retries of its own)."""
    ATTEMPTS.append("asked")
    client = openai.OpenAI(api_key="local-key-not-secret", base_url=OPENAI_URL[0], max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return "answered"


@pytest.mark.parametrize(
    ("behaviour", "attempts"),
    [(BUSY, 3), (QUOTA_SPENT, 1)],
    ids=["busy: may pass", "quota spent: cannot pass"],
)
def test_a_tool_calling_a_provider_is_retried_by_the_one_classifier(
    use_models, ctx, behaviour, attempts
):
    with serve(Canned([]), behave=lambda body, n: behaviour) as (url, requests):
        OPENAI_URL[:] = [url]
        record = run_tool_step(use_models, ctx, ask_an_api, step_max_attempts=3)
    assert record["status"] == "failed"
    assert len(ATTEMPTS) == len(requests) == attempts == record["attempts"]


# --- the one classifier -------------------------------------------------------------------

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/messages")


class OtherClientError(Exception):
    """Another provider's client error (anthropic's, google's): a status and a body."""

    def __init__(self, status: int, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = httpx.Response(status, request=REQUEST)
        self.body = body


class APIError(Exception):
    """An error sent inside a 200 reply (no status to go by), named as openai's and others'."""

    def __init__(self, body: object) -> None:
        super().__init__(str(body))
        self.body = body


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (OtherClientError(529), True),  # anthropic's "overloaded"
        (OtherClientError(429), True),
        (OtherClientError(429, {"error": {"type": "insufficient_quota"}}), False),
        (OtherClientError(400, {"error": {"code": "context_length_exceeded"}}), False),
        (OtherClientError(401), False),
        (
            openai.RateLimitError(
                "quota",
                response=httpx.Response(429, request=REQUEST),
                body={"code": "insufficient_quota", "type": "insufficient_quota"},
            ),
            False,
        ),
        (APIError("The server had an error while processing your request"), True),
        (APIError({"error": {"type": "server_error", "message": "try later"}}), True),
        (APIError({"error": {"type": "invalid_request_error", "code": "bad_request"}}), False),
        (ModelCallError("cut off after part of its reply was shown", transient=True), True),
        (ProviderError("the provider failed (after 3 tries)"), False),
    ],
)
def test_one_classifier_for_models_and_tools(exc, transient):
    assert is_transient(exc) is transient
    failure = modelcalls.provider_failure(exc)
    if failure is not None:  # the model layer reads the same answer
        assert failure.may_pass is transient
