"""Issue 29: a resume with nothing to resume is refused up front and stores nothing.

A ``Command`` (any shape) or ``None`` sent to a thread that never started used to reach the
intake node (``KeyError: 'task'``) and leave checkpoints waiting at ``intake``. It is refused
with :class:`InvalidInputError` before LangGraph stores anything, on every saver, sync and
async; the thread then takes a task as any new thread does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, savers, scripted, step, thread

TOOLS = ToolRegistry([echo])
GOOD = plan_of(step(1, "echo", {"text": "hi"}))

NOTHING_TO_RESUME: dict[str, Any] = {
    "resume-text": Command(resume="approve"),
    "resume-answer": Command(resume={"action": "approve", "digest": "0" * 64, "version": 1}),
    "resume-by-interrupt-id": Command(resume={"0123456789abcdef0123456789abcdef": "approve"}),
    "update": Command(update={"task": "sum sales"}),
    "update-and-resume": Command(update={"feedback": "shorter"}, resume="approve"),
    "goto": Command(goto="planner"),
    "none": None,
}
STORES = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.server)]


def stored(saver: Any, config: dict[str, Any]) -> list[Any]:
    return list(saver.list(config))


async def astored(saver: Any, config: dict[str, Any]) -> list[Any]:
    return [c async for c in saver.alist(config)]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("sent", list(NOTHING_TO_RESUME), ids=list(NOTHING_TO_RESUME))
def test_a_resume_of_a_thread_that_never_started_is_refused_and_stores_nothing(
    sent, store, use_models, ctx, tmp_path, request
):
    use_models(planner=scripted(plan_reply(GOOD)))
    config = thread()
    with savers(store, tmp_path, request) as (sync_saver, _), sync_saver() as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        with pytest.raises(InvalidInputError) as refused:
            graph.invoke(NOTHING_TO_RESUME[sent], config, context=ctx())
        assert "\n" not in str(refused.value)
        if sent != "goto":  # refused for what it is already
            assert "nothing to resume" in str(refused.value)
            assert "{'task': " in str(refused.value)  # says how to start one
        assert stored(saver, config) == []
        assert graph.get_state(config).values == {}

        asked = graph.invoke({"task": "t"}, config, context=ctx())  # the thread starts normally
        assert asked["__interrupt__"][0].value["type"] == "plan_approval"
        done = graph.invoke(Command(resume="approve"), config, context=ctx())
        assert done["final"]["status"] == "succeeded"


@pytest.mark.parametrize("store", STORES)
def test_async_resumes_of_a_thread_that_never_started_are_refused(
    store, use_models, ctx, tmp_path, request
):
    use_models(planner=scripted(plan_reply(GOOD)))
    config = thread()

    async def scenario() -> list[str]:
        with savers(store, tmp_path, request) as (_, async_saver):
            async with async_saver() as saver:
                graph = build_graph(checkpointer=saver, tools=TOOLS)
                refusals = []
                for sent in NOTHING_TO_RESUME.values():
                    with pytest.raises(InvalidInputError) as refused:
                        await graph.ainvoke(sent, config, context=ctx())
                    refusals.append(str(refused.value))
                    assert await astored(saver, config) == []
                with pytest.raises(InvalidInputError, match="nothing to resume"):
                    async for _ in graph.astream(Command(resume="approve"), config):
                        pass
                assert (await graph.aget_state(config)).values == {}
                await graph.ainvoke({"task": "t"}, config, context=ctx())
                done = await graph.ainvoke(Command(resume="approve"), config, context=ctx())
                assert done["final"]["status"] == "succeeded"
                return refusals

    refusals = asyncio.run(scenario())
    assert sum("nothing to resume" in r for r in refusals) == len(NOTHING_TO_RESUME) - 1


def test_a_resume_from_a_checkpoint_that_does_not_exist_is_refused(use_models, ctx, tmp_path):
    use_models(planner=scripted(plan_reply(GOOD)))
    config = thread()
    with savers("sqlite", tmp_path, None) as (sync_saver, _), sync_saver() as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        graph.invoke({"task": "t"}, config, context=ctx())
        before = stored(saver, config)
        missing = {"configurable": {**config["configurable"], "checkpoint_id": "1f0-nope"}}
        with pytest.raises(InvalidInputError, match="nothing to resume"):
            graph.invoke(Command(resume="approve"), missing, context=ctx())
        assert len(stored(saver, config)) == len(before)
        assert graph.get_state(config).next == ("approval",)


@pytest.mark.parametrize("edit", [{"feedback": "x"}, {}, None])
@pytest.mark.parametrize("sent", ["resume-text", "none"])
def test_a_resume_after_state_edits_alone_is_refused(sent, edit, use_models, ctx):
    """``update_state`` on a thread no run has started stores a checkpoint with no task: a
    resume of it is still nothing to resume (found by a hostile review: KeyError 'task')."""
    from langgraph.checkpoint.memory import InMemorySaver

    use_models(planner=scripted(plan_reply(GOOD)))
    graph, config = build_graph(checkpointer=InMemorySaver(), tools=TOOLS), thread()
    graph.update_state(config, edit)
    with pytest.raises(InvalidInputError, match="nothing to resume"):
        graph.invoke(NOTHING_TO_RESUME[sent], config, context=ctx())
    with pytest.raises(InvalidInputError, match="nothing to resume"):
        asyncio.run(graph.ainvoke(NOTHING_TO_RESUME[sent], config, context=ctx()))
    asked = graph.invoke({"task": "t"}, config, context=ctx())  # the thread starts normally
    assert asked["__interrupt__"][0].value["type"] == "plan_approval"


def test_a_run_resumed_from_its_input_checkpoint_continues(use_models, ctx):
    """The input checkpoint holds the input, not yet applied (no task in state): a resume or
    replay from it continues the run, as one whose stream closed right after its first event
    does. Found when a state-edits-only thread was first refused for having no task."""
    from langgraph.checkpoint.memory import InMemorySaver

    use_models(planner=scripted(plan_reply(GOOD, match=".")))
    graph, config = build_graph(checkpointer=InMemorySaver(), tools=TOOLS), thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    first = next(c for c in graph.checkpointer.list(config) if c.metadata["source"] == "input")
    assert "task" not in first.checkpoint["channel_values"]
    replay = {"configurable": {**config["configurable"], **first.config["configurable"]}}
    asked = graph.invoke(None, replay, context=ctx())
    assert asked["__interrupt__"][0].value["type"] == "plan_approval"
