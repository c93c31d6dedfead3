"""No secret leaves a run: not through task inputs, traces, any stream mode, checkpoints or files.

The hostile run of ``tests.leaky`` puts two env secrets into every channel it can reach; each
test scans what a user, a tracer or the disk can see of it.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage
from langgraph.types import Command

from planexec import build_graph
from planexec.redaction.secrets import REDACTED
from planexec.storage.persistence import async_sqlite_saver, sqlite_saver
from tests import leaky
from tests.helpers import thread
from tests.integration.test_tracing import Recorder

ALL_MODES = ["values", "updates", "custom", "messages", "debug", "tasks", "checkpoints"]


def check_outcome(values, workspace, db, seen):
    """The run did what it should, with every secret replaced, and left no secret anywhere."""
    steps = values["steps"]
    assert steps["1"]["status"] == "succeeded"
    assert steps["1"]["output"]["key"] == REDACTED
    assert steps["1"]["output"]["nested"] == [f"Bearer {REDACTED}"]
    assert steps["2"]["error"] == f"ValueError: auth failed with key {REDACTED}"
    assert steps["3"]["attempts"] == 2 and REDACTED in steps["3"]["error"]
    assert steps["4"]["output"] is None and steps["4"]["output_file"]["bytes"] > 1024  # spilled
    assert steps["5"]["output"] == f"Done. The key is {REDACTED} and the token is {REDACTED}."
    assert steps["8"]["output"] == f"the planner says {REDACTED}"
    assert values["plan"]["steps"][0]["description"] == f"fetch with {REDACTED}"
    assert f"Done. The key is {REDACTED}" in (workspace / "report.md").read_text()
    assert values["final"]["status"] == "partial"
    assert leaky.leaks(values) == []
    assert leaky.leaks(seen) == []
    root = workspace.parents[1]  # the operator's root: every workspace and the spilled outputs
    assert leaky.leaking_files([root, db.parent]) == []


def test_every_stream_mode_the_tracer_and_the_checkpoints_stay_clean_sync(hostile, workspace):
    db = workspace.parent / "db" / "runs.sqlite"
    recorder = Recorder()
    with sqlite_saver(db) as saver:
        graph = build_graph(checkpointer=saver, tools=leaky.registry())
        config = {**thread(), "callbacks": [recorder]}
        chunks = []
        for payload in ({"task": "t"}, Command(resume={"action": "approve"})):
            chunks += [
                (mode, data)  # subgraphs=True: (namespace, mode, data), from tasks too
                for _, mode, data in graph.stream(
                    payload, config, context=hostile, stream_mode=ALL_MODES, subgraphs=True
                )
            ]
        history = list(graph.get_state_history(config))
        values = graph.get_state(config).values
    assert {c[0] for c in chunks} >= {"values", "custom", "messages", "tasks", "checkpoints"}
    streamed_models = [c[1][0] for c in chunks if c[0] == "messages"]
    assert any(REDACTED in str(m.content) for m in streamed_models if isinstance(m, AIMessage))
    tool_events = [c[1] for c in chunks if c[0] == "custom" and "tool_says" in c[1]]
    assert tool_events and tool_events[0]["tool_says"] == REDACTED
    runs = [(r.name, r.inputs, r.outputs, r.error, r.serialized, r.extra) for r in recorder.runs]
    assert any(name.startswith("step 1") for name, *_ in runs)
    check_outcome(values, workspace, db, {"chunks": chunks, "history": history, "runs": runs})


def test_every_stream_mode_the_tracer_and_the_checkpoints_stay_clean_async(hostile, workspace):
    db = workspace.parent / "db" / "runs.sqlite"
    recorder = Recorder()

    async def scenario():
        async with async_sqlite_saver(db) as saver:
            graph = build_graph(checkpointer=saver, tools=leaky.registry())
            config = {**thread(), "callbacks": [recorder]}
            chunks = [
                c
                async for c in graph.astream(
                    {"task": "t"}, config, context=hostile, stream_mode=ALL_MODES
                )
            ]
            chunks += [
                c
                async for c in graph.astream(
                    Command(resume={"action": "approve"}),
                    config,
                    context=hostile,
                    stream_mode=ALL_MODES,
                )
            ]
            history = [s async for s in graph.aget_state_history(config)]
            return chunks, history, (await graph.aget_state(config)).values

    chunks, history, values = asyncio.run(scenario())
    runs = [(r.name, r.inputs, r.outputs, r.error, r.serialized, r.extra) for r in recorder.runs]
    check_outcome(values, workspace, db, {"chunks": chunks, "history": history, "runs": runs})


def test_stream_events_stay_clean(hostile, workspace):
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(checkpointer=InMemorySaver(), tools=leaky.registry())
    config = thread()

    async def scenario():
        events = [e async for e in graph.astream_events({"task": "t"}, config, context=hostile)]
        events += [
            e
            async for e in graph.astream_events(
                Command(resume={"action": "approve"}), config, context=hostile
            )
        ]
        return events

    events = asyncio.run(scenario())
    kinds = {e["event"] for e in events}
    assert {"on_chat_model_end", "on_tool_start", "on_tool_end"} <= kinds
    assert leaky.leaks(events) == []
    assert graph.get_state(config).values["final"]["status"] == "partial"


def test_step_tasks_take_only_the_step(hostile):
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(checkpointer=InMemorySaver(), tools=leaky.registry())
    config = thread()
    graph.invoke({"task": "t"}, config, context=hostile)
    started = [
        chunk["payload"]
        for chunk in graph.stream(
            Command(resume={"action": "approve"}), config, context=hostile, stream_mode="debug"
        )
        if chunk["type"] == "task" and chunk["payload"]["name"] in ("run_step", "arun_step")
    ]
    assert len(started) == 8
    for payload in started:  # (args, kwargs) of the task: the step's JSON and nothing else
        args, kwargs = payload["input"]
        assert kwargs == {} and len(args) == 1 and isinstance(args[0], dict), payload
        assert args[0]["id"] in range(1, 9)


SERVER_MODES = [
    "values",
    "updates",
    "custom",
    "messages",
    "messages-tuple",
    "debug",
    "tasks",
    "checkpoints",
    "events",
]


@pytest.mark.server
def test_no_secret_reaches_a_client_of_the_server(tmp_path):
    import json

    from langgraph_sdk import get_client

    from tests.helpers import plan_of, plan_reply, step, text_reply
    from tests.servers import langgraph_dev

    root = tmp_path / "root"
    ws = root / "shared" / "ws"
    ws.mkdir(parents=True)
    planted = ws / "keys.txt"
    planted.write_text(f"OPENAI_API_KEY={leaky.SECRET}\nMY_SERVICE_TOKEN={leaky.TOKEN}\n")
    plan = plan_of(
        {**step(1, "read_file", {"path": "keys.txt"}), "description": f"read {leaky.SECRET}"},
        step(2, None, {"notes": "$1.content"}, [1]),
        step(3, "write_report", {"title": "Keys", "summary": "$2"}, [2]),
        step(4, "read_file", {"path": f"missing-{leaky.SECRET}.txt"}),
        step(5, "write_file", {"path": "copy.txt", "content": "$1.content"}, [1]),
    )
    scripts = {
        "planner": [plan_reply(plan).model_dump()],
        "executor": [
            {"tool_calls": [{"name": "read_file", "args": {"path": "keys.txt"}}]},
            text_reply(f"The key is {leaky.SECRET}, the token {leaky.TOKEN}.").model_dump(),
        ],
        "evaluator": [r.model_dump() for r in leaky.judge().replies],
    }
    context: dict[str, object] = {"shared_folder": "ws", "llm_judge": True, "max_replans": 0}
    for role, replies in scripts.items():
        path = tmp_path / f"{role}.json"
        path.write_text(json.dumps(replies))
        context[f"{role}_model"] = f"scripted:{path}"

    async def scenario(url: str) -> tuple[list[object], dict[str, object]]:
        client = get_client(url=url)
        tid = (await client.threads.create())["thread_id"]
        seen: list[object] = []
        runs = [  # "messages" alone streams messages/partial|complete; with the tuple form, not
            (
                {"input": {"task": "read the keys"}},
                [m for m in SERVER_MODES if m != "messages-tuple"],
            ),
            ({"command": {"resume": "approve"}}, SERVER_MODES),
        ]
        for payload, modes in runs:
            async for part in client.runs.stream(
                tid, "planexec", context=context, stream_mode=modes, **payload
            ):
                seen.append((part.event, part.data))
        state = await client.threads.get_state(tid)
        seen.append(await client.threads.get_history(tid, limit=100))
        seen.append(await client.threads.get(tid))
        return seen, state

    server_env = {**leaky.ENV, "PLANEXEC_WORKSPACE_ROOT": str(root)}
    with langgraph_dev(tmp_path / "server.log", extra_env=server_env) as url:
        seen, state = asyncio.run(scenario(url))
    events = {event for event, _ in seen[:-2]}  # type: ignore[misc]
    assert {"values", "custom", "messages", "debug", "tasks", "checkpoints", "events"} <= events
    assert REDACTED in json.dumps([data for event, data in seen[:-2] if event == "messages"])  # type: ignore[misc]
    assert {"messages/metadata", "messages/complete"} <= events, events
    values = state["values"]
    assert values["steps"]["1"]["output"]["content"].startswith(f"OPENAI_API_KEY={REDACTED}")
    assert values["steps"]["2"]["output"] == f"The key is {REDACTED}, the token {REDACTED}."
    assert values["final"]["status"] == "partial", values["final"]
    assert leaky.leaks(seen) == [] and leaky.leaks(state) == []
    assert leaky.leaking_files([root], skip=[planted]) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_token_streaming_model_streams_only_whole_scrubbed_replies(use_models, ctx, mode):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.helpers import plan_of, plan_reply, scripted, step

    plan = plan_of(step(1, None, {"topic": "keys"}, expected="the key"))
    streaming = GenericFakeChatModel(messages=iter([AIMessage(f"the key is {leaky.SECRET} ok")]))
    use_models(planner=scripted(plan_reply(plan)), executor=streaming)
    graph = build_graph(checkpointer=InMemorySaver(), tools=leaky.registry())
    config, context = thread(), ctx()
    graph.invoke({"task": "t"}, config, context=context)
    resume = Command(resume={"action": "approve"})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", leaky.SECRET)
        if mode == "sync":
            chunks = list(graph.stream(resume, config, context=context, stream_mode="messages"))
        else:

            async def collect():
                return [
                    c
                    async for c in graph.astream(
                        resume, config, context=context, stream_mode="messages"
                    )
                ]

            chunks = asyncio.run(collect())
    by_node = [(meta["langgraph_node"], message.content) for message, meta in chunks]
    texts = [text for node, text in by_node if node == "run_step"]  # the step task's model
    assert texts == [f"the key is {REDACTED} ok"]  # one whole reply, no token chunks
    assert by_node[-1] == ("finalizer", texts[0])  # the chat's answer message, scrubbed too
    assert graph.get_state(config).values["steps"]["1"]["output"] == texts[0]
