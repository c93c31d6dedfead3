"""History and time travel on every saver: fork at the approval with an edited plan."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread


@contextmanager
def saver_of(kind, request, tmp_path):
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "runs.db")) as saver:
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(request.getfixturevalue("postgres_url")) as saver:
            saver.setup()
            yield saver


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_fork_from_the_approval_with_an_edited_plan(
    kind, durability, request, tmp_path, use_models, ctx
):
    use_models(planner=scripted(plan_reply(plan_of(step(1, "echo", {"text": "original"})))))
    with saver_of(kind, request, tmp_path) as saver:
        graph = build_graph(checkpointer=saver, tools=ToolRegistry([echo]))
        config = thread()
        graph.invoke({"task": "t"}, config, context=ctx(), durability=durability)
        done = graph.invoke(
            Command(resume={"action": "approve"}), config, context=ctx(), durability=durability
        )
        assert done["steps"]["1"]["output"] == "original"
        original_head = graph.get_state(config)

        history = list(graph.get_state_history(config))
        at_approval = next(h for h in history if h.next == ("approval",))
        edited = plan_of(step(1, "echo", {"text": "forked"}))
        fork = graph.update_state(at_approval.config, None, as_node="planner")  # a new branch
        assert graph.get_state(fork).next == ("approval",)
        forked = graph.invoke(
            Command(resume={"action": "edit", "plan": edited}),
            fork,
            context=ctx(),
            durability=durability,
        )
        assert forked["steps"]["1"]["output"] == "forked"
        assert graph.get_state(config).values["steps"]["1"]["output"] == "forked"
        still = graph.get_state(original_head.config)
        assert still.values["steps"]["1"]["output"] == "original"
        assert still.values["final"]["status"] == "succeeded"


def test_async_saver_history(tmp_path, use_models, ctx):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    use_models(planner=scripted(plan_reply(plan_of(step(1, "echo", {"text": "a"})))))

    async def go():
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
            graph = build_graph(checkpointer=saver, tools=ToolRegistry([echo]))
            config = thread()
            await graph.ainvoke({"task": "t"}, config, context=ctx())
            await graph.ainvoke(Command(resume={"action": "approve"}), config, context=ctx())
            return [h.next async for h in graph.aget_state_history(config)]

    nexts = asyncio.run(go())
    assert ("approval",) in nexts and ("executor",) in nexts and () in nexts
