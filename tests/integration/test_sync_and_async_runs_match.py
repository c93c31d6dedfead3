"""Hostile differential tests: the same scripted scenario run sync (invoke) and async (ainvoke).

Each scenario runs twice with fresh probe models: what the run leaves (state, usage, errors,
which model API was called) must be the same (each node is written once: a sync run runs it on
planexec's background loop), and no run may call a model's sync API on an event loop
(blocking it). A scripted model is not a provider
integration: it is called on a daemon worker as its caller is (:mod:`planexec.llm.calls`).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel, PrivateAttr

from planexec import graph as graph_module
from planexec.graph import build_graph
from planexec.llm import calls as modelcalls
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import (
    always_fails,
    echo,
    plan_of,
    plan_reply,
    savers,
    step,
    text_reply,
    thread,
)

_nested: contextvars.ContextVar[bool] = contextvars.ContextVar("probe_nested", default=False)


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Probe(ScriptedChatModel):
    """A scripted model that records which API each call used, and raises when told to."""

    _api: list[str] = PrivateAttr(default_factory=list)
    _raises: list[BaseException] = PrivateAttr(default_factory=list)
    _async_error: BaseException | None = PrivateAttr(default=None)

    def _record(self, api: str) -> None:
        if _nested.get():
            return
        self._api.append("sync-on-loop" if api == "sync" and _on_loop() else api)
        if api == "async" and self._async_error is not None:
            raise self._async_error
        if self._raises:
            raise self._raises.pop(0)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._record("sync")
        return super()._generate(messages, stop, None, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._record("async")
        return ScriptedChatModel._generate(self, messages, stop, None, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self._record("sync")
        token = _nested.set(True)
        try:
            yield from super()._stream(messages, stop, None, **kwargs)
        finally:
            _nested.reset(token)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self._record("async")
        token = _nested.set(True)
        try:
            chunks = list(ScriptedChatModel._stream(self, messages, stop, None, **kwargs))
        finally:
            _nested.reset(token)
        for chunk in chunks:
            yield chunk


def probe(*replies: ScriptedReply, stream: int = 0) -> Probe:
    """A fresh probe model with these replies."""
    return Probe(replies=list(replies), stream_chunk_chars=stream)


TOOLS = ToolRegistry([echo, always_fails])
Models = Callable[[], dict[str, Probe]]


def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Model calls and nodes retry after 10 ms instead of seconds (same attempts, same rule)."""
    quick = graph_module.MODEL_RETRY._replace(initial_interval=0.01)
    monkeypatch.setattr(graph_module, "MODEL_RETRY", quick)
    monkeypatch.setattr(modelcalls, "FIRST_BACKOFF", 0.01)


RUN_DEPENDENT = ("started_at", "ended_at", "elapsed", "task_message", "at", "busy_seconds")


def normal(value: Any) -> Any:
    """A state with run-dependent values (times, message ids) taken out."""
    if isinstance(value, BaseMessage):
        return (value.type, value.content, value.name, getattr(value, "tool_calls", None))
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items() if k not in RUN_DEPENDENT}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


@pytest.fixture
def ctx(ctx: Callable[..., Any]) -> Callable[..., Any]:
    """The test context, with no approval asked (the runs here are not about approval)."""
    return lambda **overrides: ctx(**{"approval": "never", **overrides})


def outcome(
    kind: str, make: Models, use_models: Any, context: Any, payloads: list[Any]
) -> dict[str, Any]:
    """Run the payloads one after the other (sync or async) on fresh models; what is left."""
    models = use_models(**make())
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval="never")
    config = thread()
    error: tuple[str, str] | None = None

    async def arun() -> None:
        for payload in payloads:
            await graph.ainvoke(payload, config, context=context)

    try:
        if kind == "sync":
            for payload in payloads:
                graph.invoke(payload, config, context=context)
        else:
            asyncio.run(arun())
    except Exception as exc:
        error = (type(exc).__name__, str(exc))
    state = graph.get_state(config)
    return {
        "values": normal(state.values),
        "next": state.next,
        "error": error,
        "api": {role: list(m._api) for role, m in models.items()},
        "prompts": {role: list(m.prompts) for role, m in models.items()},
    }


def differential(make: Models, use_models: Any, context: Any, payloads: list[Any]) -> dict:
    """Run sync then async; assert they agree; return the sync outcome."""
    sync = outcome("sync", make, use_models, context, payloads)
    asy = outcome("async", make, use_models, context, payloads)
    for role, calls in sync["api"].items():  # one implementation: the same API, call by call
        assert calls == asy["api"][role], (role, calls, asy["api"][role])
    for key in ("values", "next", "error", "prompts"):
        assert sync[key] == asy[key], key
    return sync


GOOD = plan_of(step(1, "echo", {"text": "hello"}))
BAD = plan_of(step(1, "no_such_tool", {"text": "hello"}))
FAILING = plan_of(step(1, "always_fails", {"reason": "disk full"}), step(2, "echo", {"text": "x"}))
VERDICTS_OK = ScriptedReply(
    tool_calls=[{"name": "Verdicts", "args": {"verdicts": [{"step": 1, "ok": True}]}}]
)
VERDICTS_NO = ScriptedReply(
    tool_calls=[{"name": "Verdicts", "args": {"verdicts": [{"step": 1, "ok": False}]}}]
)
TASK = {"task": "say hello"}


@pytest.mark.parametrize("stream", [0, 7])
def test_plan_repair_loop_is_the_same_sync_and_async(use_models, ctx, stream):
    def make() -> dict[str, Probe]:
        return {
            "planner": probe(
                plan_reply(BAD), text_reply("not json {"), plan_reply(GOOD), stream=stream
            )
        }

    out = differential(make, use_models, ctx(max_plan_repairs=2), [TASK])
    assert out["values"]["final"]["status"] == "succeeded"
    assert len(out["api"]["planner"]) == 3


def test_no_valid_plan_is_the_same_sync_and_async(use_models, ctx):
    def make() -> dict[str, Probe]:
        return {"planner": probe(plan_reply(BAD), plan_reply(BAD), text_reply("{"))}

    out = differential(make, use_models, ctx(max_plan_repairs=2), [TASK])
    assert "no valid plan in 3 attempts" in out["values"]["final"]["answer"], out["values"]


def test_replan_is_the_same_sync_and_async(use_models, ctx):
    def make() -> dict[str, Probe]:
        return {
            "planner": probe(
                plan_reply(FAILING),
                plan_reply(BAD),
                plan_reply(plan_of(step(3, "echo", {"text": "instead"}))),
            )
        }

    out = differential(make, use_models, ctx(), [TASK])
    assert out["values"]["replans"] == 1 and out["values"]["final"]["status"] == "succeeded"


@pytest.mark.parametrize(
    "verdicts", [[VERDICTS_NO, VERDICTS_OK], [text_reply("I think it is fine")], [VERDICTS_NO] * 2]
)
def test_judging_is_the_same_sync_and_async(use_models, ctx, verdicts):
    def make() -> dict[str, Probe]:
        return {"planner": probe(plan_reply(GOOD)), "evaluator": probe(*verdicts)}

    differential(make, use_models, ctx(llm_judge=True, max_replans=0), [TASK])


REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def transient_errors() -> list[BaseException]:
    return [
        openai.APITimeoutError(request=REQUEST),
        httpx.ConnectError("refused", request=REQUEST),
        openai.RateLimitError("slow down", response=httpx.Response(429, request=REQUEST), body={}),
    ]


@pytest.mark.parametrize("role", ["planner", "evaluator"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_transient_model_errors_are_retried_the_same(use_models, ctx, monkeypatch, role, count):
    fast_retries(monkeypatch)

    def make() -> dict[str, Probe]:
        models = {"planner": probe(plan_reply(GOOD)), "evaluator": probe(VERDICTS_OK)}
        models[role]._raises = transient_errors()[:count]
        return models

    out = differential(make, use_models, ctx(llm_judge=True), [TASK])
    assert len(out["api"][role]) == count + (count < 3)
    if count == 3:  # the model layer's three tries, then the provider's words
        assert out["error"] is not None and out["error"][0] == "ProviderError", out["error"]
        assert "HTTP 429" in out["error"][1] and "slow down (after 3 tries)" in out["error"][1]
    else:
        assert out["values"]["final"]["status"] == "succeeded", out["values"]


@pytest.mark.parametrize("role", ["planner", "evaluator"])
def test_non_transient_model_errors_fail_the_same(use_models, ctx, monkeypatch, role):
    fast_retries(monkeypatch)

    def make() -> dict[str, Probe]:
        models = {"planner": probe(plan_reply(GOOD)), "evaluator": probe(VERDICTS_OK)}
        models[role]._raises = [
            openai.AuthenticationError(
                "bad key", response=httpx.Response(401, request=REQUEST), body={}
            )
        ]
        return models

    out = differential(make, use_models, ctx(llm_judge=True), [TASK])
    assert out["error"] is not None and out["error"][0] == "ProviderError", out["error"]
    assert "(HTTP 401): bad key (it cannot pass by asking again)" in out["error"][1]
    assert len(out["api"][role]) == 1


@pytest.mark.parametrize(
    "spec", ["nosuchprovider:model", "openai:gpt-4.1", "scripted:/nonexistent.json", ":"]
)
def test_bad_model_specs_fail_the_same(ctx, spec):
    payloads = [TASK]

    def run(kind: str) -> tuple[str, str]:
        graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval="never")
        context = ctx(planner_model=spec)
        try:
            if kind == "sync":
                graph.invoke(payloads[0], thread(), context=context)
            else:
                asyncio.run(graph.ainvoke(payloads[0], thread(), context=context))
        except Exception as exc:
            return type(exc).__name__, str(exc)
        raise AssertionError("no error")

    assert run("sync") == run("async")


ALL_MODES = ["values", "updates", "custom", "messages", "debug", "tasks", "checkpoints"]


def streamed(kind: str, make: Models, use_models: Any, context: Any, payloads: list[Any]) -> Any:
    """Stream the payloads with every mode (sync or async) on fresh models: the chunks, models."""
    models = use_models(**make())
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS, approval="never")
    config = thread()
    chunks: list[tuple[str, Any]] = []

    async def arun() -> None:
        for payload in payloads:
            async for mode, data in graph.astream(
                payload, config, context=context, stream_mode=ALL_MODES
            ):
                chunks.append((mode, data))

    if kind == "sync":
        for payload in payloads:
            chunks.extend(graph.stream(payload, config, context=context, stream_mode=ALL_MODES))
    else:
        asyncio.run(arun())
    return chunks, models, graph.get_state(config).values


def leaked(value: Any, given: str) -> list[str]:
    """The secrets in any string inside ``value`` but the text the user gave (kept as given)."""
    from tests import leaky

    found: set[str] = set()

    def walk(item: Any) -> None:
        if isinstance(item, str):
            if item != given:
                found.update(s for s in leaky.SECRETS if s in item)
        elif isinstance(item, dict):
            for key, sub in item.items():
                walk(key)
                walk(sub)
        elif isinstance(item, list | tuple | set):
            for sub in item:
                walk(sub)
        elif isinstance(item, ScriptedChatModel):
            walk(item.prompts)  # its replies are the script
        elif isinstance(item, BaseModel):
            walk(item.model_dump())

    walk(value)
    return sorted(found)


def test_streams_hold_no_internal_call_and_no_secret(use_models, ctx, monkeypatch):
    from tests import leaky

    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    secret_plan = plan_of(
        {**step(1, "echo", {"text": f"key {leaky.SECRET}"}), "description": f"d {leaky.TOKEN}"},
        step(2, None, {"notes": "$1"}, [1]),
    )

    def make() -> dict[str, Probe]:
        return {
            "planner": probe(plan_reply(BAD), plan_reply(secret_plan), stream=5),
            "executor": probe(text_reply(f"answer with {leaky.SECRET}")),
            "evaluator": probe(
                ScriptedReply(
                    tool_calls=[
                        {
                            "name": "Verdicts",
                            "args": {
                                "verdicts": [
                                    {"step": 1, "ok": True, "reason": leaky.TOKEN},
                                    {"step": 2, "ok": True, "reason": leaky.SECRET},
                                ]
                            },
                        }
                    ]
                )
            ),
        }

    task = {"task": f"use {leaky.SECRET} and {leaky.TOKEN}"}
    results = {}
    for kind in ("sync", "async"):
        chunks, models, values = streamed(kind, make, use_models, ctx(llm_judge=True), [task])
        results[kind] = chunks
        assert leaked(chunks, task["task"]) == [], kind
        assert leaked(values, task["task"]) == [], kind
        assert leaked(models, "") == [], kind  # what the models were sent
        messages = [data[0] for mode, data in chunks if mode == "messages"]
        internal = [m for m in messages if getattr(m, "tool_calls", None)]
        assert internal == [], (kind, internal)
        assert values["final"]["status"] == "succeeded", values["final"]
        custom = [data for mode, data in chunks if mode == "custom"]
        assert [c["event"] for c in custom[:3]] == ["plan_step"] * 3
    for mode in ALL_MODES:
        assert len([c for c in results["sync"] if c[0] == mode]) == len(
            [c for c in results["async"] if c[0] == mode]
        ), mode
    assert normal([d for m, d in results["sync"] if m == "custom"]) == normal(
        [d for m, d in results["async"] if m == "custom"]
    )


class Gated(Probe):
    """A probe whose first async call waits (until cancelled) once it has been entered.

    ``_entered`` is a thread's event: the call runs on planexec's model loop, not the test's.
    """

    _entered: threading.Event | None = PrivateAttr(default=None)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self._entered is not None and not self._entered.is_set():
            self._record("async")
            self._entered.set()
            await asyncio.Event().wait()  # held until the run is cancelled
        return await super()._agenerate(messages, *args, **kwargs)


@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_cancelled_async_planner_resumes_sync_then_async(use_models, ctx, tmp_path, request, store):
    revised = plan_of(step(3, "echo", {"text": "z"}))
    planner = Gated(replies=[plan_reply(FAILING), plan_reply(revised)])
    use_models(planner=planner)
    context = ctx(approval="first")
    config = thread()
    with savers(store, tmp_path, request) as (sync_saver, async_saver):

        async def start() -> None:
            planner._entered = entered = threading.Event()
            async with async_saver() as saver:
                graph = build_graph(checkpointer=saver, tools=TOOLS)
                run = asyncio.create_task(graph.ainvoke(TASK, config, context=context))
                assert await asyncio.to_thread(entered.wait, 30)
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run

        asyncio.run(start())
        assert planner._api == ["async"]
        with sync_saver() as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS)
            state = graph.get_state(config)
            assert state.next == ("planner",), state
            out = graph.invoke(None, config, context=context)  # the planner again, sync
            assert "__interrupt__" in out, out
            assert planner._api == ["async", "async"]  # one node: the async API, whoever runs it

        async def approve() -> dict[str, Any]:
            async with async_saver() as saver:
                graph = build_graph(checkpointer=saver, tools=TOOLS)
                return await graph.ainvoke(
                    Command(resume={"action": "approve"}), config, context=context
                )

        out = asyncio.run(approve())
        assert planner._api == ["async", "async", "async"]  # the replanner, async
        assert out["final"]["status"] == "succeeded", out["final"]
        with sync_saver() as saver:
            values = build_graph(checkpointer=saver, tools=TOOLS).get_state(config).values
        assert values["usage"]["planner"]["calls"] == 1, values["usage"]
        assert values["usage"]["replanner"]["calls"] == 1, values["usage"]
