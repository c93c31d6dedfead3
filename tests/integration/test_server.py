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

from tests.helpers import DEMO, plan_of, sales_plan, step
from tests.servers import langgraph_dev

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server_root(tmp_path_factory):
    """The operator's workspace root of the served graph (PLANEXEC_WORKSPACE_ROOT)."""
    return tmp_path_factory.mktemp("server-root")


@pytest.fixture(scope="module")
def server_folder(tmp_path_factory):
    """The scratch folder ``langgraph dev`` runs in (its config, log and .langgraph_api)."""
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="module")
def server(server_folder, server_root):
    log = server_folder / "langgraph-dev.log"
    # plan memory off unless a test's context turns it on: the tests share the server's store
    env = {"PLANEXEC_WORKSPACE_ROOT": str(server_root), "PLANEXEC_PLAN_MEMORY": "off"}
    with langgraph_dev(log, env) as url:
        yield url


def test_the_server_keeps_its_files_in_a_scratch_folder(server, server_folder):
    assert (server_folder / ".langgraph_api").is_dir()
    assert json.loads((server_folder / "langgraph.json").read_text())["env"] == {}


def one_plan_script(path, plan) -> str:
    """A scripted planner whose first reply is ``plan``."""
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}]))
    return f"scripted:{path}"


@pytest.fixture
def run_context(tmp_path, server_root):
    name = f"sales-{uuid.uuid4().hex[:8]}"
    ws = server_root / "shared" / name
    ws.mkdir(parents=True)
    shutil.copy(DEMO / "sales.csv", ws / "sales.csv")
    script = one_plan_script(tmp_path / "planner.json", sales_plan())
    return {"planner_model": script, "shared_folder": name}, ws


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
        assert list(schemas["input_schema"]["properties"]) == ["task", "messages"]
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
    shutil.copy(DEMO / "sales.csv", server_root / "threads" / tid / "sales.csv")
    remote.invoke({"task": "Analyze sales.csv"}, config, context=context)
    state = remote.get_state(config)
    assert state.next == ("approval",)
    out = remote.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded"
    assert len(list(remote.get_state_history(config))) >= 5
    assert (server_root / "threads" / tid / "output" / "report.md").exists()


def planner_script(path, replies):
    """A scripted planner for the server: each reply answers prompts matching its regex."""
    path.write_text(
        json.dumps([{"match": m, "tool_calls": [{"name": "Plan", "args": p}]} for m, p in replies])
    )
    return f"scripted:{path}"


LIST = {"goal": "list", "steps": [{"id": 1, "tool": "list_files", "description": "list"}]}
WRITE = {
    "goal": "write",
    "steps": [
        {
            "id": 1,
            "tool": "write_file",
            "args": {"path": "notes.md", "content": "written"},
            "description": "write notes",
        }
    ],
}


def test_the_approval_contract_holds_over_the_api(server, server_root, tmp_path):
    """Issue 8, cases 1-3 through langgraph_sdk, as Studio and other clients drive the server."""
    name = f"contract-{uuid.uuid4().hex[:8]}"
    ws = server_root / "shared" / name
    ws.mkdir(parents=True)
    planner = planner_script(
        tmp_path / "planner.json",
        [("second thoughts", LIST), ("task one", LIST), ("task two", WRITE)],
    )
    context = {"planner_model": planner, "shared_folder": name}

    async def interrupt_of(client, tid):
        state = await client.threads.get_state(tid)
        return state["interrupts"][0]["value"] if state["interrupts"] else None

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "planexec", input={"task": "task one"}, context=context)
        v1 = await interrupt_of(client, tid)
        approve = {"action": "approve", "digest": v1["digest"]}
        await client.runs.wait(tid, "planexec", command={"resume": approve}, context=context)
        assert (await client.threads.get_state(tid))["values"]["final"]["status"] == "succeeded"

        # 1. a new task on the thread asks again: its write_file plan does not run by itself
        await client.runs.wait(tid, "planexec", input={"task": "task two"}, context=context)
        v2 = await interrupt_of(client, tid)
        assert v2 is not None and v2["side_effect_tools"] == ["write_file"]
        assert not (ws / "notes.md").exists()

        # 2. Studio's state editor: only task/plan/feedback, and an edited plan must be approved
        with pytest.raises(Exception, match="only feedback, plan, task can be edited"):
            forged = {"version": v2["version"], "digest": v2["digest"], "by": "reviewer"}
            await client.threads.update_state(tid, {"approved": {**forged, "tools": []}})
        changed = {**v2["plan"], "goal": "changed behind the reviewer's back"}
        await client.threads.update_state(tid, {"plan": changed})
        await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "approve", "digest": v2["digest"]}}
        )
        asked = await interrupt_of(client, tid)
        assert asked["origin"] == "state edit" and "awaiting approval" in asked["error"]
        assert not (ws / "notes.md").exists()

        # 3. reviewer A rejects while reviewer B approves what B saw: B's answer is refused
        reject = {"action": "reject", "feedback": "second thoughts"}
        await client.runs.create(tid, "planexec", command={"resume": reject}, context=context)
        b = await client.runs.create(
            tid,
            "planexec",
            command={"resume": {"action": "approve", "digest": asked["digest"]}},
            context=context,
            multitask_strategy="enqueue",
        )
        await client.runs.join(tid, b["run_id"])
        latest = await interrupt_of(client, tid)
        assert latest["plan"]["goal"] == "list" and latest["version"] == asked["version"] + 1
        assert "awaiting approval" in latest["error"]
        assert not (ws / "notes.md").exists()
        state = await client.threads.get_state(tid)
        assert (
            state["values"]["revisions"][-1]["reason"]
            == "rejected by the reviewer: second thoughts"
        )

    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["/etc", "", "..", "../../etc"])
def test_api_clients_cannot_choose_the_sandbox(server, server_root, tmp_path, name):
    script = one_plan_script(
        tmp_path / "p.json", plan_of(step(1, "read_file", {"path": "hostname"}))
    )

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        result = await client.runs.wait(
            tid,
            "planexec",
            input={"task": "read the hostname"},
            context={"planner_model": script, "shared_folder": name, "approval": "never"},
            raise_error=False,
        )
        return tid, result, await client.threads.get_state(tid)

    tid, result, state = asyncio.run(scenario())
    assert result["__error__"]["error"] == "InvalidContextError", result
    assert "shared_folder" in result["__error__"]["message"]
    assert not state["values"].get("steps")
    assert not (server_root / "threads" / tid).exists()


def test_concurrent_api_threads_never_share_files(server, server_root, tmp_path):
    scripts = {
        label: one_plan_script(
            tmp_path / f"{label}.json",
            plan_of(step(1, "write_file", {"path": "out.txt", "content": f"written by {label}"})),
        )
        for label in ("A", "B")
    }

    async def scenario():
        client = get_client(url=server)
        tids = {label: (await client.threads.create())["thread_id"] for label in scripts}

        async def run(label: str) -> None:  # plan, approve what was shown, run
            context = {"planner_model": scripts[label]}
            tid = tids[label]
            await client.runs.wait(
                tid, "planexec", input={"task": "write out.txt"}, context=context
            )
            asked = (await client.threads.get_state(tid))["interrupts"][0]["value"]
            answer = {"action": "approve", "digest": asked["digest"]}
            await client.runs.wait(tid, "planexec", command={"resume": answer}, context=context)

        await asyncio.gather(*(run(label) for label in scripts))
        return tids

    for label, tid in asyncio.run(scenario()).items():
        assert (server_root / "threads" / tid / "out.txt").read_text() == f"written by {label}"


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


def test_a_resume_of_a_thread_that_never_started_is_refused_over_the_api(server, run_context):
    context, _ = run_context

    async def scenario():
        client = get_client(url=server)
        thread = await client.threads.create()
        refused = await client.runs.wait(
            thread["thread_id"],
            "planexec",
            command={"resume": "approve"},
            context=context,
            raise_error=False,
        )
        state = await client.threads.get_state(thread["thread_id"])
        history = await client.threads.get_history(thread["thread_id"])
        asked = await client.runs.wait(
            thread["thread_id"], "planexec", input={"task": "t"}, context=context
        )
        return refused, state, history, asked

    refused, state, history, asked = asyncio.run(scenario())
    assert refused["__error__"]["error"] == "InvalidInputError"
    assert "nothing to resume" in refused["__error__"]["message"]
    assert not state["values"] and history == []  # refused before anything was stored
    assert asked["__interrupt__"][0]["value"]["type"] == "plan_approval"


WRITE_STEPS_TEXT = json.dumps(WRITE["steps"])  # what Agent Chat UI's textarea sends back
ANSWER_STYLES = {
    "planexec": ({"action": "approve"}, "succeeded"),
    "v1 approve": ({"decisions": [{"type": "approve"}]}, "succeeded"),
    "v1 edit, textarea text": (
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "run_plan",
                        "args": {"goal": "write", "steps": WRITE_STEPS_TEXT},
                    },
                }
            ]
        },
        "wrote",
    ),
    "v1 reject, message": ({"decisions": [{"type": "reject", "message": "again"}]}, "asked"),
    "v1 reject, none": ({"decisions": [{"type": "reject"}]}, "cancelled"),
    "legacy accept": ([{"type": "accept", "args": None}], "succeeded"),
    "legacy edit": (
        [{"type": "edit", "args": {"action": "run_plan", "args": {"goal": "w", **WRITE}}}],
        "wrote",
    ),
    "legacy response": ([{"type": "response", "args": "again"}], "asked"),
    "legacy ignore": ([{"type": "ignore", "args": None}], "cancelled"),
}


def test_every_answer_style_over_the_api(server, server_root, tmp_path):
    """Agent Chat UI (LangChain v1 HITL), the legacy Agent Inbox, and planexec's own answers.

    The styles run at once, each on its own thread in its own workspace."""
    planner = planner_script(tmp_path / "planner.json", [("again", LIST), ("list", LIST)])

    async def one(client, answer, ends):
        name = f"styles-{uuid.uuid4().hex[:8]}"
        ws = server_root / "shared" / name
        ws.mkdir(parents=True)
        context = {"planner_model": planner, "shared_folder": name}
        tid = (await client.threads.create())["thread_id"]
        chat = {"messages": [{"role": "user", "content": "list the files"}]}
        await client.runs.wait(tid, "planexec", input=chat, context=context)
        pending = (await client.threads.get_state(tid))["interrupts"][0]
        asked = pending["value"]
        assert asked["action_requests"][0]["name"] == "run_plan"
        assert asked["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
        assert asked["config"]["allow_respond"] and "| 1 | `list_files` |" in asked["description"]
        (ws / "notes.md").unlink(missing_ok=True)
        await client.runs.wait(tid, "planexec", command={"resume": answer}, context=context)
        state = await client.threads.get_state(tid)
        values = state["values"]
        if ends == "asked":
            again = state["interrupts"][0]["value"]
            assert again["version"] == 2 and again["error"] is None
            return
        status = "succeeded" if ends == "wrote" else ends
        assert values["final"]["status"] == status, values["final"]
        assert values["messages"][-1]["type"] == "ai"
        assert values["messages"][-1]["content"].startswith(values["final"]["answer"])
        assert (ws / "notes.md").exists() == (ends == "wrote")

    async def scenario():
        client = get_client(url=server)
        await asyncio.gather(
            *(one(client, answer, ends) for answer, ends in ANSWER_STYLES.values())
        )

    asyncio.run(scenario())


def test_model_errors_reach_the_api_client_with_their_message(server):
    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        return await client.runs.wait(
            tid, "planexec", input={"task": "t"}, context={"planner_model": "bogus:model-1"}
        )

    with pytest.raises(Exception, match="ConfigurationError: unknown model provider 'bogus'"):
        asyncio.run(scenario())  # the SDK raises the run's error with its message


def test_plan_steps_stream_over_the_api_and_stay_out_of_messages(server, server_root, tmp_path):
    """A streaming planner's steps reach API clients as ``plan_step`` events while it writes;
    the ``messages`` stream carries the chat, not the plan being written."""
    name = f"stream-{uuid.uuid4().hex[:8]}"
    (server_root / "shared" / name).mkdir(parents=True)
    plan = plan_of(step(1, "list_files", {}), step(2, "list_files", {}))
    script = tmp_path / "planner.json"
    script.write_text(
        json.dumps(
            {
                "replies": [{"tool_calls": [{"name": "Plan", "args": plan}]}],
                "stream_chunk_chars": 8,
            }
        )
    )
    context = {"planner_model": f"scripted:{script}", "shared_folder": name}

    async def scenario() -> tuple[list, list]:
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        custom, messages = [], []
        async for part in client.runs.stream(
            tid,
            "planexec",
            input={"messages": [{"role": "user", "content": "list the files"}]},
            context=context,
            stream_mode=["custom", "messages-tuple"],
        ):
            if part.event == "custom":
                custom.append(part.data)
            elif part.event.startswith("messages"):
                messages.append(part.data)
        return custom, messages

    custom, messages = asyncio.run(scenario())
    shown = [e for e in custom if e.get("event") == "plan_step"]
    assert [(e["by"], e["index"], e["written"]["tool"]) for e in shown] == [
        ("planner", 1, "list_files"),
        ("planner", 2, "list_files"),
    ]
    # no planner chunk in the chat stream: the plan shows there once, as the approval's message
    nodes = [meta.get("langgraph_node") for _, meta in messages]
    assert "planner" not in nodes
    showing = [m["content"] for m, _ in messages if "list_files" in str(m)]
    assert len(showing) == 1 and showing[0].count("`list_files`") == 2
    assert nodes.count("approval") == 1


def test_a_budget_given_over_the_api_is_estimated_at_approval_and_ends_the_run(server, run_context):
    """Studio and the SDK pass budgets in the run's context like any other setting."""
    context, ws = run_context

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        first = await client.runs.wait(
            tid,
            "planexec",
            input={"task": "Analyze sales.csv"},
            context={**context, "max_tokens": 10**9},
        )
        [asked] = first["__interrupt__"]
        estimate = asked["value"]["estimate"]
        assert estimate["spent"]["calls"] == 1 and estimate["spent"]["tokens"] > 1
        assert estimate["budgets"] == {"max_tokens": 1e9}
        assert "Budgets of this run: at most 1,000,000,000 tokens." in asked["value"]["description"]
        done = await client.runs.wait(
            tid,
            "planexec",
            command={"resume": {"action": "approve"}},
            context={**context, "max_tokens": 1},  # the planner spent more than that
        )
        final = done["final"]
        assert final["status"] == "failed", final
        assert final["budget"]["budget"] == "tokens" and final["budget"]["limit"] == 1
        assert "the token budget is spent" in final["answer"]
        with pytest.raises(Exception, match=r"max_cost: Input should be greater than or equal"):
            await client.runs.wait(
                tid, "planexec", input={"task": "again"}, context={**context, "max_cost": -1}
            )

    asyncio.run(scenario())
    assert not (ws / "output").exists()  # no step started


def test_a_failed_step_asks_over_the_api_and_the_answer_is_taken(server, run_context, tmp_path):
    context, ws = run_context
    plan = plan_of(
        {**step(1, "read_file", {"path": "not-there.txt"}), "on_failure": "ask"},
        step(2, "list_files", {}),
    )
    context = {**context, "planner_model": one_plan_script(tmp_path / "ask.json", plan)}

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "planexec", input={"task": "read it"}, context=context)
        asked = await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "approve"}}, context=context
        )
        [question] = asked["__interrupt__"]
        assert question["value"]["type"] == "step_failure"
        assert question["value"]["step"]["id"] == 1
        state = await client.threads.get_state(tid)
        assert state["next"] == ["failure_review"]
        assert state["values"]["steps"]["2"]["status"] == "succeeded"
        refused = await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "skip", "step": 2}}, context=context
        )
        assert "about step 1, not 2" in refused["__interrupt__"][0]["value"]["refused"]
        # Agent Chat UI's answer style (a HITL edit of the step's arguments) is read too
        args = {"args": '{"no_such_arg": 1}'}
        edit = {"type": "edit", "edited_action": {"name": "retry_failed_step", "args": args}}
        hitl = await client.runs.wait(
            tid, "planexec", command={"resume": {"decisions": [edit]}}, context=context
        )
        again = hitl["__interrupt__"][0]["value"]
        assert again["type"] == "step_failure" and "no_such_arg" in again["refused"], again
        done = await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "skip", "step": 1}}, context=context
        )
        return done

    done = asyncio.run(scenario())
    assert done["final"]["status"] == "partial", done["final"]


def test_plan_memory_uses_the_servers_store(server, run_context, tmp_path):
    """On LangGraph Server the platform's store keeps the templates: a second thread with a
    task of the same shape gets the first thread's approved plan, with no planner call."""
    context, ws = run_context
    context = {**context, "plan_memory": True}
    task = f"Analyze sales.csv and chart revenue for shop {uuid.uuid4().hex[:6]}"

    async def scenario():
        client = get_client(url=server)
        first = (await client.threads.create())["thread_id"]
        await client.runs.wait(first, "planexec", input={"task": task}, context=context)
        done = await client.runs.wait(
            first, "planexec", command={"resume": {"action": "approve"}}, context=context
        )
        assert done["final"]["status"] == "succeeded", done["final"]
        second = (await client.threads.create())["thread_id"]
        again = {**context, "planner_model": "scripted:/nonexistent/no-planner-call.json"}
        asked = await client.runs.wait(
            second, "planexec", input={"task": task.replace("revenue", "quantity")}, context=again
        )
        return first, asked["__interrupt__"][0]["value"]

    first, request = asyncio.run(scenario())
    assert request["origin"] == "memory" and request["memory"]["run"] == first
    assert request["memory"]["changes"] == ["revenue → quantity"]


def test_typed_outputs_over_the_api(server, run_context):
    """Issue 27: the approval shows what each step produces; a wrong reference is refused."""
    context, ws = run_context

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(
            tid, "planexec", input={"task": "Analyze sales.csv"}, context=context
        )
        [asked] = (await client.threads.get_state(tid))["interrupts"]
        produces = asked["value"]["produces"]
        assert len(produces) == 6 and produces["1"].startswith("{rows: integer")
        assert "produces" in asked["value"]["description"]

        edited = sales_plan()
        edited["steps"][1]["args"]["dataset"] = "$1.datset"
        await client.runs.wait(
            tid,
            "planexec",
            command={"resume": {"action": "edit", "plan": edited}},
            context=context,
        )
        [again] = (await client.threads.get_state(tid))["interrupts"]
        assert (
            "$1.datset does not exist: no field 'datset' (fields: rows, columns,"
            in (again["value"]["error"])
        )
        assert again["value"]["plan"] == asked["value"]["plan"]
        await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "approve"}}, context=context
        )
        final = (await client.threads.get_state(tid))["values"]
        assert final["final"]["status"] == "succeeded", final["final"]

    asyncio.run(scenario())
