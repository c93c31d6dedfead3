"""planexec through the LangGraph API server, as Studio and the SDK use it."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid

import pytest
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.helpers import EXAMPLES, sales_plan
from tests.servers import langgraph_dev

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with langgraph_dev(tmp_path_factory.mktemp("server") / "langgraph-dev.log") as url:
        yield url


@pytest.fixture
def run_context(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", ws / "sales.csv")
    script = tmp_path / "planner.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": sales_plan()}]}]))
    return {"planner_model": f"scripted:{script}", "workspace": str(ws)}, ws


def test_sdk_plan_approve_edit_and_history(server, run_context):
    context, ws = run_context

    async def scenario():
        client = get_client(url=server)
        [assistant] = await client.assistants.search(graph_id="planexec")
        drawn = await client.assistants.get_graph(assistant["assistant_id"])
        assert {n["id"] for n in drawn["nodes"]} >= {
            "planner",
            "approval",
            "executor",
            "evaluator",
            "replanner",
            "finalizer",
        }
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
        assert list(schemas["input_schema"]["properties"]) == ["task"]
        assert "max_parallel_steps" in schemas["context_schema"]["properties"]

        thread = await client.threads.create()
        tid = thread["thread_id"]
        interrupts = []
        async for part in client.runs.stream(
            tid,
            "planexec",
            input={"task": "Analyze sales.csv"},
            context=context,
            stream_mode=["updates"],
        ):
            if part.event == "updates" and "__interrupt__" in (part.data or {}):
                interrupts.extend(part.data["__interrupt__"])
        assert interrupts and interrupts[0]["value"]["type"] == "plan_approval"
        state = await client.threads.get_state(tid)
        assert state["next"] == ["approval"]
        assert len(state["values"]["plan"]["steps"]) == 6
        assert (await client.threads.get(tid))["status"] == "interrupted"

        edited = sales_plan()
        edited["steps"][4]["args"]["title"] = "Edited through the API"
        events = []
        async for part in client.runs.stream(
            tid,
            "planexec",
            command={"resume": {"action": "edit", "plan": edited}},
            context=context,
            stream_mode=["custom", "values"],
        ):
            if part.event == "custom":
                events.append(part.data)
        assert {e["event"] for e in events} >= {"step_started", "step_finished"}
        final = (await client.threads.get_state(tid))["values"]
        assert final["final"]["status"] == "succeeded", final["final"]
        assert final["plan"]["version"] == 2
        history = await client.threads.get_history(tid, limit=50)
        assert len(history) >= 5
        assert {tuple(h["next"]) for h in history} >= {("approval",), ("executor",)}

    asyncio.run(scenario())
    assert (ws / "output" / "report.md").exists()


def test_remote_graph_runs_like_a_local_one(server, run_context):
    context, ws = run_context
    remote = RemoteGraph("planexec", url=server)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    remote.invoke({"task": "Analyze sales.csv"}, config, context=context)
    state = remote.get_state(config)
    assert state.next == ("approval",)
    out = remote.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded"
    assert len(list(remote.get_state_history(config))) >= 5


def test_planexec_errors_reach_server_users_with_their_message(server, run_context):
    context, _ = run_context

    async def scenario():
        client = get_client(url=server)
        thread = await client.threads.create()
        bad = {**context, "max_parallel_steps": "four", "step_timeout": None}
        refused = await client.runs.wait(
            thread["thread_id"], "planexec", input={"task": "t"}, context=bad, raise_error=False
        )
        no_key = await client.runs.wait(
            (await client.threads.create())["thread_id"],
            "planexec",
            input={"task": "t"},
            context={**context, "planner_model": "openai:gpt-4.1"},
            raise_error=False,
        )
        return refused, no_key, await client.threads.get_state(thread["thread_id"])

    refused, no_key, state = asyncio.run(scenario())
    assert refused["__error__"]["error"] == "InvalidContextError"
    message = refused["__error__"]["message"]
    assert message.startswith("invalid context: ")
    assert "max_parallel_steps" in message and "step_timeout" in message
    assert not state["values"]  # refused before anything was stored
    assert no_key["__error__"]["error"] == "ConfigurationError"
    assert no_key["__error__"]["message"].startswith("OPENAI_API_KEY is not set")
