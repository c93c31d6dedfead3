"""The approval answered in the ecosystem's HITL styles (LangChain v1, legacy Agent Inbox)."""

from __future__ import annotations

import json

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.interrupt import HumanInterrupt
from langgraph.types import Command
from pydantic import TypeAdapter

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

FIRST = plan_of(step(1, "echo", {"text": "one"}), step(2, "echo", {"text": "got ${1}"}, [1]))
REVISED = plan_of(step(1, "echo", {"text": "revised"}))
EDITED_STEPS = plan_of(step(1, "echo", {"text": "edited"}))["steps"]


def v1(decision):
    return {"decisions": [decision]}


def v1_edit(steps):
    return v1(
        {
            "type": "edit",
            "edited_action": {"name": "run_plan", "args": {"goal": "g", "steps": steps}},
        }
    )


STYLES = {
    "v1 approve": (v1({"type": "approve"}), "succeeded", "got one"),
    "v1 edit (textarea JSON text)": (v1_edit(json.dumps(EDITED_STEPS)), "succeeded", "edited"),
    "v1 edit (objects)": (v1_edit(EDITED_STEPS), "succeeded", "edited"),
    "v1 reject with a message": (v1({"type": "reject", "message": "shorter"}), "asked again", None),
    "v1 reject without one": (v1({"type": "reject"}), "cancelled", None),
    "legacy accept": ([{"type": "accept", "args": None}], "succeeded", "got one"),
    "legacy edit": (
        [
            {
                "type": "edit",
                "args": {"action": "run_plan", "args": {"goal": "g", "steps": EDITED_STEPS}},
            }
        ],
        "succeeded",
        "edited",
    ),
    "legacy response": ([{"type": "response", "args": "shorter"}], "asked again", None),
    "legacy ignore": ([{"type": "ignore", "args": None}], "cancelled", None),
}


@pytest.fixture
def graph():
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


def test_the_interrupt_is_both_hitl_requests_with_a_published_answer_schema(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(FIRST)))
    config = thread()
    graph.invoke({"task": "say things"}, config, context=ctx())
    pending = graph.get_state(config).interrupts[0]
    TypeAdapter(HITLRequest).validate_python(pending.value)
    TypeAdapter(HumanInterrupt).validate_python(pending.value)
    request = pending.value["action_requests"][0]
    assert request["name"] == "run_plan"
    assert request["args"] == {"goal": FIRST["goal"], "steps": pending.value["plan"]["steps"]}
    assert "| 2 | `echo` |" in request["description"]
    assert pending.value["plan"]["version"] == 1  # planexec's own keys are all still there


@pytest.mark.parametrize(("answer", "ends", "last_output"), STYLES.values(), ids=list(STYLES))
def test_each_answer_style_decides_the_plan(graph, use_models, ctx, answer, ends, last_output):
    use_models(planner=scripted(plan_reply(FIRST), plan_reply(REVISED)))
    config = thread()
    graph.invoke({"task": "say things"}, config, context=ctx())
    out = graph.invoke(Command(resume=answer), config, context=ctx())
    if ends == "asked again":
        again = out["__interrupt__"][0].value
        assert again["version"] == 2 and again["error"] is None
        state = graph.get_state(config).values
        assert state["revisions"][-1]["reason"] == "rejected by the reviewer: shorter"
        return
    assert "__interrupt__" not in out, out["__interrupt__"][0].value["error"]
    assert out["final"]["status"] == ends
    if last_output is not None:
        steps = out["steps"]
        assert steps[max(steps, key=int)]["output"] == last_output


@pytest.mark.parametrize(
    "answer",
    [
        v1({"type": "respond", "message": "x"}),
        "[" * 100_000,  # JSON text too deep to read: was raised from the node, every resume
        v1("approve"),
        v1({"type": "reject", "message": "   "}),
        v1_edit("[" + "9" * 5000 + "]"),
        {"decisions": [{"type": "approve"}, {"type": "reject"}]},
        v1_edit("[{"),
        v1({"type": "edit", "edited_action": {"name": "delete_all", "args": {}}}),
    ],
)
def test_a_hitl_answer_planexec_cannot_read_is_refused_and_asked_again(
    graph, use_models, ctx, answer
):
    use_models(planner=scripted(plan_reply(FIRST)))
    config = thread()
    graph.invoke({"task": "say things"}, config, context=ctx())
    out = graph.invoke(Command(resume=answer), config, context=ctx())
    again = out["__interrupt__"][0].value
    assert again["error"].startswith("answer not understood")
    assert again["version"] == 1
    out = graph.invoke(Command(resume=v1({"type": "approve"})), config, context=ctx())
    assert out["final"]["status"] == "succeeded"


def test_a_hitl_approve_naming_another_plan_is_refused(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(FIRST)))
    config = thread()
    graph.invoke({"task": "say things"}, config, context=ctx())
    out = graph.invoke(
        Command(resume=v1({"type": "approve", "digest": "0" * 64})), config, context=ctx()
    )
    assert "awaiting approval" in out["__interrupt__"][0].value["error"]
    assert graph.get_state(config).values["steps"]["1"]["status"] == "pending"
