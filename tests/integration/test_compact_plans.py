"""A planner that writes the compact format: the approval view and state get the whole plan."""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_reply, scripted, thread

ran: list[str] = []


@tool
def count(label: str) -> str:
    """Record that it ran; return the label."""
    ran.append(label)
    return label


count.metadata = {"side_effects": False}  # declared harmless


COMPACT = {
    "goal": "count around a failure",
    "steps": [
        {"count": {"label": "first"}},
        {"always_fails": {"reason": "disk full"}, "depends_on": [1]},
        {"count": {"label": "after ${2}"}, "expected_output": "a label"},
    ],
}


def test_a_compact_plan_is_approved_whole_and_replanned_compactly(use_models, ctx):
    ran.clear()
    revision = {
        "goal": "x",
        "steps": [{"count": {"label": "instead of ${1}"}}, {"echo": {"text": "$2"}}],
    }
    planner = use_models(planner=scripted(plan_reply(COMPACT), plan_reply(revision)))["planner"]
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([count, always_fails, echo])
    )
    config = thread()
    asked = graph.invoke({"task": "t"}, config, context=ctx())["__interrupt__"][0].value
    steps = asked["plan"]["steps"]
    assert [(s["id"], s["tool"], s["depends_on"]) for s in steps] == [
        (1, "count", []),
        (2, "always_fails", [1]),
        (3, "count", [2]),
    ]
    assert steps[0]["description"] == "count: Record that it ran; return the label"
    assert steps[2]["expected_output"] == "a label"
    assert '"count": {"label": "first"}' not in str(asked)  # shown in the full format only

    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx(approval="first"))
    assert out["final"]["status"] == "succeeded", out["final"]
    assert "your first step is step 2" in planner.prompts[1]  # numbering after the kept step
    final = graph.get_state(config).values["plan"]["steps"]
    assert [(s["id"], s["tool"], s["depends_on"]) for s in final] == [
        (1, "count", []),
        (2, "count", [1]),
        (3, "echo", [2]),
    ]
    assert ran == ["first", "instead of first"]
    assert out["steps"]["3"]["output"] == "instead of first"


def test_a_plan_may_leave_out_its_goal_and_give_one_argument_bare(use_models, ctx):
    """The shortest plan a model can write: no goal (the task's is used), bare arguments."""
    ran.clear()
    short = {"steps": [{"count": "first"}, {"always_fails": "disk full"}, {"count": "$1"}]}
    revision = {"steps": [{"count": "again"}]}
    use_models(planner=scripted(plan_reply(short), plan_reply(revision)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([count, always_fails]))
    config = thread()
    task = "Count twice\nand say what failed"
    asked = graph.invoke({"task": task}, config, context=ctx())["__interrupt__"][0].value
    assert asked["plan"]["goal"] == "Count twice"
    steps = asked["plan"]["steps"]
    assert [(s["tool"], s["args"], s["depends_on"]) for s in steps] == [
        ("count", {"label": "first"}, []),
        ("always_fails", {"reason": "disk full"}, []),
        ("count", {"label": "$1"}, [1]),
    ]
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx(approval="first"))
    assert out["final"]["status"] == "succeeded", out["final"]
    final = graph.get_state(config).values["plan"]
    assert final["goal"] == "Count twice"  # a revision without a goal keeps the plan's
    assert ran == ["first", "first", "again"]
