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

from tests.helpers import EXAMPLES, plan_of, sales_plan, step
from tests.servers import langgraph_dev

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server_root(tmp_path_factory):
    """The operator's workspace root of the served graph (PLANEXEC_WORKSPACE_ROOT)."""
    return tmp_path_factory.mktemp("server-root")


@pytest.fixture(scope="module")
def server(tmp_path_factory, server_root):
    log = tmp_path_factory.mktemp("server") / "langgraph-dev.log"
    with langgraph_dev(log, {"PLANEXEC_WORKSPACE_ROOT": str(server_root)}) as url:
        yield url


def planner_script(path, plan) -> str:
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}]))
    return f"scripted:{path}"


@pytest.fixture
def run_context(tmp_path, server_root):
    name = f"sales-{uuid.uuid4().hex[:8]}"
    ws = server_root / "shared" / name
    ws.mkdir(parents=True)
    shutil.copy(EXAMPLES / "sales.csv", ws / "sales.csv")
    script = planner_script(tmp_path / "planner.json", sales_plan())
    return {"planner_model": script, "workspace": name}, ws


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


def test_remote_graph_runs_like_a_local_one(server, run_context, server_root):
    context, _ = run_context
    context = {"planner_model": context["planner_model"]}  # no name: the thread's own folder
    remote = RemoteGraph("planexec", url=server)
    tid = str(uuid.uuid4())
    config = {"configurable": {"thread_id": tid}}
    (server_root / "threads" / tid).mkdir(parents=True)
    shutil.copy(EXAMPLES / "sales.csv", server_root / "threads" / tid / "sales.csv")
    remote.invoke({"task": "Analyze sales.csv"}, config, context=context)
    state = remote.get_state(config)
    assert state.next == ("approval",)
    out = remote.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded"
    assert len(list(remote.get_state_history(config))) >= 5
    assert (server_root / "threads" / tid / "output" / "report.md").exists()


@pytest.mark.parametrize("name", ["/etc", "", "..", "../../etc"])
def test_api_clients_cannot_choose_the_sandbox(server, server_root, tmp_path, name):
    script = planner_script(
        tmp_path / "p.json", plan_of(step(1, "read_file", {"path": "hostname"}))
    )

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        result = await client.runs.wait(
            tid,
            "planexec",
            input={"task": "read the hostname"},
            context={"planner_model": script, "workspace": name, "approval": "never"},
            raise_error=False,
        )
        return tid, result, await client.threads.get_state(tid)

    tid, result, state = asyncio.run(scenario())
    assert result["__error__"]["error"] == "SandboxError", result
    assert "workspace" in result["__error__"]["message"]
    assert not state["values"].get("steps")
    assert not (server_root / "threads" / tid).exists()


def test_concurrent_api_threads_never_share_files(server, server_root, tmp_path):
    scripts = {
        label: planner_script(
            tmp_path / f"{label}.json",
            plan_of(step(1, "write_file", {"path": "out.txt", "content": f"written by {label}"})),
        )
        for label in ("A", "B")
    }

    async def scenario():
        client = get_client(url=server)
        tids = {label: (await client.threads.create())["thread_id"] for label in scripts}
        await asyncio.gather(
            *(
                client.runs.wait(
                    tids[label],
                    "planexec",
                    input={"task": "write out.txt"},
                    context={"planner_model": scripts[label], "approval": "never"},
                )
                for label in scripts
            )
        )
        return tids

    for label, tid in asyncio.run(scenario()).items():
        assert (server_root / "threads" / tid / "out.txt").read_text() == f"written by {label}"
