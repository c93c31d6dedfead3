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


COMPACT = {
    "goal": "count around a failure",
    "steps": [
        {"count": {"label": "first"}},
        {"always_fails": {"reason": "disk full"}, "depends_on": [1]},
        {"count": {"label": "after $2"}, "expected_output": "a label"},
    ],
}


def test_a_compact_plan_is_approved_whole_and_replanned_compactly(use_models, ctx):
    ran.clear()
    revision = {
        "goal": "x",
        "steps": [{"count": {"label": "instead of $1"}}, {"echo": {"text": "$2"}}],
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
