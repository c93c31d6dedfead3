from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread


@pytest.fixture
def graph():
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


def first_plan():
    return plan_of(step(1, "echo", {"text": "one"}), step(2, "echo", {"text": "got ${1}"}, [1]))


def start(graph, ctx, config):
    out = graph.invoke({"task": "say things"}, config, context=ctx())
    return out["__interrupt__"][0].value


def test_edit_runs_the_edited_plan_and_keeps_the_original(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(first_plan())))
    config = thread()
    start(graph, ctx, config)
    edited = plan_of(step(1, "echo", {"text": "edited"}))
    out = graph.invoke(Command(resume={"action": "edit", "plan": edited}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["1"]["output"] == "edited"
    state = graph.get_state(config).values
    assert state["plan"]["version"] == 2
    assert state["revisions"][0]["reason"] == "edited by the reviewer"
    assert state["revisions"][0]["plan"]["steps"][0]["args"] == {"text": "one"}


def test_invalid_edit_is_refused_and_asked_again_with_nothing_lost(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(first_plan())))
    config = thread()
    asked = start(graph, ctx, config)
    bad = plan_of(step(1, "no_such_tool"), step(2, "echo", {"text": "$3"}))
    out = graph.invoke(Command(resume={"action": "edit", "plan": bad}), config, context=ctx())
    again = out["__interrupt__"][0].value
    assert "unknown tool 'no_such_tool'" in again["error"]
    assert "refers to $3, but there is no step 3" in again["error"]
    assert again["plan"] == asked["plan"]
    assert graph.get_state(config).next == ("approval",)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == "got one"


@pytest.mark.parametrize(
    "answer",
    [{"action": "launch"}, 42, {"action": "reject"}, "", {"action": "edit", "plan": "not a dict"}],
)
def test_malformed_answers_are_refused(graph, use_models, ctx, answer):
    use_models(planner=scripted(plan_reply(first_plan())))
    config = thread()
    start(graph, ctx, config)
    out = graph.invoke(Command(resume=answer), config, context=ctx())
    value = out["__interrupt__"][0].value
    assert value["error"].startswith("answer not understood")
    assert value["plan"]["version"] == 1


def test_reject_sends_feedback_to_the_planner_and_asks_again(graph, use_models, ctx):
    planner = use_models(
        planner=scripted(
            plan_reply(first_plan()),
            plan_reply(plan_of(step(1, "echo", {"text": "shorter"}))),
        )
    )["planner"]
    config = thread()
    start(graph, ctx, config)
    out = graph.invoke(
        Command(resume={"action": "reject", "feedback": "one step is enough"}),
        config,
        context=ctx(),
    )
    value = out["__interrupt__"][0].value
    assert value["version"] == 2 and len(value["plan"]["steps"]) == 1
    assert "one step is enough" in planner.prompts[1]
    state = graph.get_state(config).values
    assert state["revisions"][0]["reason"].endswith("one step is enough")
    out = graph.invoke(Command(resume="approve"), config, context=ctx())
    assert out["steps"]["1"]["output"] == "shorter"


def test_cancel_ends_without_running_anything(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(first_plan())))
    config = thread()
    start(graph, ctx, config)
    out = graph.invoke(
        Command(resume={"action": "cancel", "reason": "not today"}), config, context=ctx()
    )
    assert out["final"]["status"] == "cancelled"
    assert all(r["status"] == "pending" for r in out["steps"].values())


def test_policy_never_runs_without_asking(use_models, ctx):
    use_models(planner=scripted(plan_reply(first_plan())))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), approval="never")
    out = graph.invoke({"task": "x"}, thread(), context=ctx(approval="never"))
    assert "__interrupt__" not in out
    assert out["final"]["status"] == "succeeded"
