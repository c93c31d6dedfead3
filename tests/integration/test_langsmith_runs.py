"""Traced runs as LangSmith shows them: model runs look like the model's, pauses are small, and
each step's record is on a run tagged with its step.

The LangSmith tests run a graph in a subprocess with tracing on, through the real ``langsmith``
client, against a loopback endpoint (:mod:`tests.langsmith_sink`) that answers ``/info`` as
LangSmith does (zstd-compressed multipart ingest); what arrives is decoded (zstd, gzip) and put
together run by run (a run's post and patch, and their ``inputs``/``outputs``/``extra``/``error``
parts). The planner is a real ``ChatOpenAI`` (``openai:...``, or an instance given to
``build_graph``) against the local OpenAI-compatible server (:mod:`tests.openai_server`), so
the invocation parameters are ChatOpenAI's own. The other tests record runs in the process
with a ``BaseTracer``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.llm.scripted import ScriptedChatModel
from planexec.review.decisions import response_schema
from planexec.tools import ToolRegistry
from tests import leaky
from tests.helpers import echo, plan_of, plan_reply, scripted, step
from tests.integration.test_tracing import Recorder
from tests.langsmith_sink import Received, run_traced, serve_langsmith
from tests.openai_server import serve, tool_call_message

PLAN = plan_of(step(1, "echo", {"text": "a"}), step(2, "echo", {"text": "$1"}, [1]))

PINNED_PASSWORD = "url-PINNED-pass-424242"
PINNED_HEADER = "hdr-PINNED-token-515151"
PINNED_BODY_KEY = "body-PINNED-key-626262"
PINNED_API_KEY = "sk-PINNED-apikey-737373"
PINNED_SECRETS = (PINNED_PASSWORD, PINNED_HEADER, PINNED_BODY_KEY, PINNED_API_KEY)
"""Secrets a model instance holds that no environment variable names: only where they sit
(a URL's password, a header, a body field named as a key) marks them."""

RUN = """
import sys
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from planexec import Context, build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo

how, root, url = sys.argv[1], sys.argv[2], sys.argv[3]
models = {}
if how == "pinned":
    from langchain_openai import ChatOpenAI
    from tests.integration.test_langsmith_runs import pinned_planner
    models["planner"] = pinned_planner(url)
graph = build_graph(
    checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), workspace_root=root, models=models
)
ctx = Context(planner_model="openai:local-planner")
config = {"configurable": {"thread_id": "runs-thread"}}
graph.invoke({"task": "t"}, config, context=ctx)
out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
assert out["final"]["status"] == "succeeded", out["final"]
wait_for_all_tracers()
"""


def pinned_planner(url: str) -> Any:
    """A ChatOpenAI whose settings hold secrets: a URL password, a header, a body field."""
    from langchain_openai import ChatOpenAI

    with_password = url.replace("http://", f"http://planner:{PINNED_PASSWORD}@")
    return ChatOpenAI(
        model="pinned-planner",
        base_url=with_password,
        api_key=PINNED_API_KEY,  # type: ignore[arg-type]
        default_headers={"X-Service-Token": PINNED_HEADER},
        extra_body={"service_key": PINNED_BODY_KEY},
        model_kwargs={"user": "alice"},
        temperature=0.3,
        stream_usage=True,
        max_retries=0,
    )


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The planner gets PLAN."""
    return tool_call_message("Plan", PLAN)


@pytest.fixture
def planner_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The local OpenAI-compatible server, answering every request with PLAN."""
    with serve(answer) as (url, requests):
        yield url, requests


def traced(how: str, url: str, tmp_path: Any) -> Received:
    """Run RUN with LangSmith tracing on against a loopback endpoint; return what it got."""
    received = Received()
    with serve_langsmith(received) as endpoint:
        env = {**leaky.ENV, "OPENAI_BASE_URL": url}
        run_traced(RUN, how, str(tmp_path), url, endpoint=endpoint, env=env)
    return received


def planner_run(received: Received) -> dict[str, Any]:
    (run,) = received.named("planner model")
    assert run["run_type"] == "llm"
    return run


@pytest.mark.parametrize("how", ["spec", "pinned"])
def test_a_planner_run_shows_chatopenais_own_parameters(how, planner_server, tmp_path):
    url, requests = planner_server
    received = traced(how, url, tmp_path)
    run = planner_run(received)
    params = run["extra"]["invocation_params"]
    sent = requests[0]  # what ChatOpenAI sent the server
    model = "local-planner" if how == "spec" else "pinned-planner"
    assert sent["model"] == model
    assert params["_type"] == "openai-chat"
    assert params["model"] == params["model_name"] == model
    assert params["tools"] == sent["tools"]  # the planner's Plan schema, as ChatOpenAI sent it
    assert [t["function"]["name"] for t in params["tools"]] == ["Plan"]
    assert params["tool_choice"] == sent["tool_choice"]
    assert params["stream"] is sent["stream"] is True  # the plan streams as it is written
    metadata = run["extra"]["metadata"]
    assert metadata["ls_provider"] == "openai"
    assert metadata["ls_model_name"] == model
    if how == "pinned":
        assert params["temperature"] == metadata["ls_temperature"] == 0.3
        assert params["user"] == "alice"  # model_kwargs, as ChatOpenAI shows them
        assert params["extra_body"] == {"service_key": "[redacted]"}


def test_a_planner_run_keeps_finish_reason_and_token_usage(planner_server, tmp_path):
    url, _ = planner_server
    run = planner_run(traced("spec", url, tmp_path))
    (generation,) = run["outputs"]["generations"][0]
    message = generation["message"]["kwargs"]
    assert message["response_metadata"]["finish_reason"] == "tool_calls"
    assert message["response_metadata"]["model_name"] == "local-planner"
    usage = message["usage_metadata"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (123, 45)
    assert generation["generation_info"]["finish_reason"] == "tool_calls"


def test_langsmith_gets_small_pauses_step_tagged_records_and_no_secret(planner_server, tmp_path):
    url, _ = planner_server
    received = traced("pinned", url, tmp_path)
    paused = [r for r in received.named("approval") if r.get("error")]
    assert paused, "the pause for approval was not sent"
    for run in paused:
        assert len(run["error"]) < MAX_PAUSE_ERROR, len(run["error"])
        assert "GraphInterrupt" in run["error"]
    for sid in (1, 2):
        (task,) = [
            r
            for r in received.runs.values()
            if r.get("run_type") == "chain" and f"planexec:step:{sid}" in (r.get("tags") or [])
        ]
        assert task["extra"]["metadata"]["planexec_step"] == sid
        assert task["outputs"]["status"] == "succeeded"
    sent = b"".join(received.bodies)
    for secret in (*leaky.SECRETS, *PINNED_SECRETS):
        assert secret.encode() not in sent, secret


MAX_PAUSE_ERROR = 10_000
"""The most characters a pause's error may take in a trace (it was 18.8 KB): LangChain's
tracer writes the interrupt's ``repr`` and a traceback repeating it, so the request (about
3.2 KB for this plan, every UI's format) shows twice; the full answer schema no longer does."""
MAX_SCHEMA = 1000
"""The most bytes of JSON the answer schema published with each pause may take (was 5.6 KB)."""


def paused_graph(use_models: Any) -> Any:
    use_models(planner=scripted(plan_reply(PLAN)))
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_pause_is_a_small_error_with_a_small_payload(use_models, ctx, mode):
    graph = paused_graph(use_models)
    recorder = Recorder()
    config = {"configurable": {"thread_id": f"paused-{mode}"}, "callbacks": [recorder]}
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=ctx())
    else:
        asyncio.run(graph.ainvoke({"task": "t"}, config, context=ctx()))
    (asked,) = graph.get_state(config).interrupts
    schema = json.dumps(asked.response_schema)
    payload = json.dumps({"value": asked.value, "response_schema": asked.response_schema})
    print(f"pause payload: {len(payload)} bytes, of which the answer schema {len(schema)}")
    assert len(schema) < MAX_SCHEMA
    assert asked.response_schema["properties"]["action"]["enum"] == [
        "approve",
        "edit",
        "reject",
        "cancel",
    ]
    errors = [run.error for run in recorder.runs if run.name == "approval" and run.error]
    assert len(errors) == 1
    print(f"pause error in the trace: {len(errors[0])} characters")
    assert len(errors[0]) < MAX_PAUSE_ERROR
    full_schema = json.dumps(response_schema())
    assert len(full_schema) > 4 * MAX_SCHEMA  # what every pause used to carry
    assert "HITLResponse" not in errors[0] and "HumanResponse" not in errors[0]
    assert asked.value["digest"][:8] in errors[0]  # it still says which plan it asks about
    # every consumer still reads the request: a v1 HITL answer is taken
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_step_task_run_is_tagged_with_its_step(use_models, ctx, mode):
    graph = paused_graph(use_models)
    recorder = Recorder()
    config = {"configurable": {"thread_id": f"tagged-{mode}"}, "callbacks": [recorder]}
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=ctx())
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    else:

        async def run() -> dict[str, Any]:
            await graph.ainvoke({"task": "t"}, config, context=ctx())
            return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=ctx())

        out = asyncio.run(run())
    assert out["final"]["status"] == "succeeded"
    tasks = [run for run in recorder.runs if run.name == "run_step"]
    assert len(tasks) == 2
    for run in tasks:
        tagged = [t for t in run.tags or [] if t.startswith("planexec:step:")]
        assert len(tagged) == 1, run.tags
        sid = int(tagged[0].rsplit(":", 1)[1])
        assert run.extra["metadata"]["planexec_step"] == sid
        assert run.extra["metadata"]["planexec_plan_version"] == 1
        assert run.outputs["status"] == "succeeded"
        assert run.inputs["step"]["id"] == sid  # its own step's record
    assert {r.extra["metadata"]["planexec_step"] for r in tasks} == {1, 2}


HELD = ("held-url-pass-1", "held-query-key-2", "held-header-3", "held-secret-4", "held-token-5")


class HoldingModel(ScriptedChatModel):
    """A chat model whose settings hold credentials where providers' clients keep them."""

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": "holding-1",
            "base_url": f"https://planner:{HELD[0]}@llm.example/v1?api-key={HELD[1]}",
            "default_headers": {"Authorization": f"Bearer {HELD[2]}"},
            "client_secret": HELD[3],
            "max_tokens": 64,
            "extra_body": {"nested": {"session_token": HELD[4]}, "region": "eu"},
        }

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Bind the tools as a provider's model does (the script still decides the reply)."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)


def test_a_models_credentials_never_reach_a_trace(ctx):
    model = HoldingModel(replies=[plan_reply(PLAN)])
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), models={"planner": model}
    )
    recorder = Recorder()
    config = {"configurable": {"thread_id": "holding"}, "callbacks": [recorder]}
    graph.invoke({"task": "t"}, config, context=ctx())
    (run,) = [run for run in recorder.runs if run.run_type == "llm"]
    params = run.extra["invocation_params"]
    assert params["model"] == "holding-1"
    assert params["max_tokens"] == 64  # a count of tokens is no token
    assert params["base_url"] == "https://llm.example/v1"
    assert params["default_headers"] == params["client_secret"] == "[redacted]"
    assert params["extra_body"] == {"nested": {"session_token": "[redacted]"}, "region": "eu"}
    assert [t["function"]["name"] for t in params["tools"]] == ["Plan"]
    for run in recorder.runs:
        seen = json.dumps(
            [run.inputs, run.outputs, run.error, run.serialized, run.extra, run.events],
            default=str,
        )
        for held in HELD:
            assert held not in seen, (run.name, held)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_steps_started_while_the_plan_streams_are_tagged_too(use_models, ctx, mode):
    # approval "never": the planner node starts the steps as their lines stream, not the executor
    use_models(planner=scripted(plan_reply(PLAN)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), approval="never")
    recorder = Recorder()
    config = {"configurable": {"thread_id": f"streamed-{mode}"}, "callbacks": [recorder]}
    run_ctx = ctx(approval="never")
    if mode == "sync":
        out = graph.invoke({"task": "t"}, config, context=run_ctx)
    else:
        out = asyncio.run(graph.ainvoke({"task": "t"}, config, context=run_ctx))
    assert out["final"]["status"] == "succeeded"
    tasks = [run for run in recorder.runs if run.name == "run_step"]
    assert len(tasks) == 2
    assert {recorder_parent(recorder, run) for run in tasks} == {"plan"}  # the planner node
    for run in tasks:
        tagged = [t for t in run.tags or [] if t.startswith("planexec:step:")]
        assert tagged == [f"planexec:step:{run.inputs['step']['id']}"], run.tags
        assert run.extra["metadata"]["planexec_step"] == run.inputs["step"]["id"]
        assert run.extra["metadata"]["planexec_plan_version"] == 1


def recorder_parent(recorder: Recorder, run: Any) -> str | None:
    """The name of the run's parent run among those recorded."""
    parents = [r.name for r in recorder.runs if r.id == run.parent_run_id]
    return parents[0] if parents else None


ODD = (
    "odd-ls-pass-1",
    "odd-sig-2",
    "odd-jwt-3",
    "odd-bearer-4",
    "odd-sas-5",
    "odd-cert-6",
    "odd-private-7",
    "odd-neutral-bearer-8",
    "odd-basic-9",
    "odd-url-pass-10",
    "odd-url-query-11",
)
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFubmVyIn0.c2lnbmF0dXJlLW9mLXRoZS1qd3Qtb2RkLTEy"
"""A JSON Web Token (header.payload.signature): a credential whatever it is named."""


class OddModel(HoldingModel):
    """A custom model whose settings and LangSmith metadata hold credentials in odd places."""

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": "odd-1",
            "max_tokens": 64,
            "max_completion_tokens": 32,
            "extra_body": {"sig": ODD[1], "jwt": ODD[2], "sas": {"sig": ODD[4]}},
            "bearer": ODD[3],
            "client_cert": ODD[5],
            "private_key_path": ODD[6],
            "note": f"Bearer {ODD[7]}",
            "fallback": f"Basic {ODD[8]}",
            "opaque": JWT,
            "mirror": f"https://user:{ODD[9]}@mirror.example/v1",
            "signed": f"https://blob.example/x?sv=1&sig={ODD[10]}",
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        return {
            **params,
            "ls_provider": "odd",
            "ls_model_name": f"https://user:{ODD[0]}@models.example/odd-1",
        }


def test_odd_credentials_in_a_models_settings_and_metadata_never_reach_a_trace(ctx):
    model = OddModel(replies=[plan_reply(PLAN)])
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), models={"planner": model}
    )
    recorder = Recorder()
    config = {"configurable": {"thread_id": "odd"}, "callbacks": [recorder]}
    graph.invoke({"task": "t"}, config, context=ctx())
    (run,) = [run for run in recorder.runs if run.run_type == "llm"]
    params = run.extra["invocation_params"]
    assert params["model"] == "odd-1"
    assert (params["max_tokens"], params["max_completion_tokens"]) == (64, 32)
    assert run.extra["metadata"]["ls_provider"] == "odd"
    assert run.extra["metadata"]["ls_model_name"] == "https://models.example/odd-1"
    for run in recorder.runs:
        seen = json.dumps(
            [run.inputs, run.outputs, run.error, run.serialized, run.extra, run.events],
            default=str,
        )
        for held in (*ODD, JWT):
            assert held not in seen, (run.name, held)
