"""Settings mean what they say: the operator's approval policy is the default of every run that
sets none, and a run may only make it stricter (issue 33)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from planexec import Context, build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

PLAN = plan_of(step(1, "echo", {"text": "hi"}))


def first_run(graph, context):
    """Start a run; return its output (an interrupt when a human must approve the plan)."""
    return graph.invoke({"task": "say hi"}, thread(), context=context)


@pytest.fixture
def planner(use_models):
    use_models(planner=scripted(plan_reply(PLAN)))


def test_a_run_that_sets_no_policy_leaves_it_to_the_operator():
    assert Context().approval is None


def test_the_operators_never_alone_runs_without_asking(planner, ctx):
    graph = build_graph(InMemorySaver(), tools=ToolRegistry([echo]), approval="never")
    out = first_run(graph, ctx())
    assert "__interrupt__" not in out
    assert out["final"]["status"] == "succeeded"


def test_never_from_the_environment_alone_runs_without_asking(planner, ctx, monkeypatch):
    monkeypatch.setenv("PLANEXEC_APPROVAL", "never")
    out = first_run(build_graph(InMemorySaver(), tools=ToolRegistry([echo])), ctx())
    assert out["final"]["status"] == "succeeded"


def test_a_run_may_ask_for_more_approvals_than_the_operator(planner, ctx):
    graph = build_graph(InMemorySaver(), tools=ToolRegistry([echo]), approval="never")
    out = first_run(graph, ctx(approval="always"))
    assert out["__interrupt__"][0].value["type"] == "plan_approval"


def test_a_run_may_not_ask_for_fewer_approvals_than_the_operator(planner, ctx):
    graph = build_graph(InMemorySaver(), tools=ToolRegistry([echo]), approval="always")
    out = first_run(graph, ctx(approval="never"))
    assert out["__interrupt__"][0].value["type"] == "plan_approval"


def test_with_no_setting_anywhere_the_first_plan_is_asked(planner, ctx, monkeypatch):
    monkeypatch.delenv("PLANEXEC_APPROVAL", raising=False)
    out = first_run(build_graph(InMemorySaver(), tools=ToolRegistry([echo])), ctx())
    assert out["__interrupt__"][0].value["type"] == "plan_approval"
