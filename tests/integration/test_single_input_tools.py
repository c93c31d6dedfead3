"""LangChain's single-input ``Tool`` (one text argument, ``tool_input``) can be planned and run.

``Tool(name=..., func=...)`` and ``Tool(name=..., func=None, coroutine=...)`` have no argument
schema of their own: LangChain shows them to models as one text argument. planexec's planner
must offer them that way and its checks must accept a step that passes it.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.tools import Tool
from langgraph.checkpoint.memory import InMemorySaver

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import plan_reply, run_plan, scripted


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


async def ashout(text: str) -> str:
    """Upper-case a text (async)."""
    return text.upper()


SYNC = Tool(name="shout", func=shout, description="Upper-case a text.")
ASYNC = Tool(name="shout", func=None, coroutine=ashout, description="Upper-case a text.")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("made", [SYNC, ASYNC], ids=["func", "coroutine"])
@pytest.mark.parametrize(
    "steps",
    [
        [{"tool": "shout", "args": {"tool_input": "hi"}}, {"shout": {"tool_input": "${1} there"}}],
        [{"shout": "hi"}, {"shout": "${1} there"}],  # compact: the one argument, bare
    ],
    ids=["full", "compact"],
)
def test_a_single_input_tool_is_planned_and_run(use_models, ctx, mode, made, steps):
    use_models(planner=scripted(plan_reply({"goal": "shout", "steps": steps})))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([made]))

    out = run_plan(graph, ctx(), mode)

    assert not out.get("planning_errors"), out.get("planning_errors")
    assert out["final"]["status"] == "succeeded", out["final"]
    assert [out["steps"][k]["output"] for k in sorted(out["steps"])] == ["HI", "HI THERE"]


def test_the_planner_is_shown_the_one_text_argument(use_models, ctx):
    described = json.loads(ToolRegistry([SYNC]).describe())
    assert described[0]["args_schema"]["properties"] == {
        "tool_input": {"title": "Tool Input", "type": "string"}
    }
    assert described[0]["args_schema"]["required"] == ["tool_input"]
    assert ToolRegistry([ASYNC]).sole_parameter("shout") == "tool_input"
