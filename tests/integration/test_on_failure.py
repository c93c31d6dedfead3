"""A step's ``on_failure``: retry it N more times, or skip it and go on, or (default) replan."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, scripted, step, thread

CALLS = itertools.count()
FLAKY_FAILS = {"left": 0}


@tool
def flaky(text: str) -> str:
    """Fail (not a transient error) while failures are left, then return the text."""
    next(CALLS)
    if FLAKY_FAILS["left"] > 0:
        FLAKY_FAILS["left"] -= 1
        raise ValueError("the service said no")
    return text


TOOLS = ToolRegistry([echo, always_fails, flaky])


def run(use_models, ctx, plan, *, mode="sync", **settings):
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config, context = thread(), ctx(**settings)
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=context)
        return graph.invoke(Command(resume={"action": "approve"}), config, context=context)

    async def go():
        await graph.ainvoke({"task": "t"}, config, context=context)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retry_n_attempts_a_failed_step_again_whatever_its_error(use_models, ctx, mode):
    FLAKY_FAILS["left"] = 2
    plan = plan_of({**step(1, "flaky", {"text": "ok"}), "on_failure": {"retry": 2}})
    out = run(use_models, ctx, plan, mode=mode, max_replans=0, retry_initial_interval=0.0)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["steps"]["1"]["attempts"] == 3
    assert out["plan"]["steps"][0]["on_failure"] == {"retry": 2}


def test_without_on_failure_a_plain_error_is_not_retried(use_models, ctx):
    FLAKY_FAILS["left"] = 2
    out = run(use_models, ctx, plan_of(step(1, "flaky", {"text": "ok"})), max_replans=0)
    assert out["steps"]["1"]["status"] == "failed" and out["steps"]["1"]["attempts"] == 1
    assert "on_failure" not in out["plan"]["steps"][0]  # the artifact is as before


def test_retries_run_out_then_the_failure_is_the_steps(use_models, ctx):
    FLAKY_FAILS["left"] = 5
    plan = plan_of({**step(1, "flaky", {"text": "ok"}), "on_failure": {"retry": 1}})
    out = run(use_models, ctx, plan, max_replans=0, retry_initial_interval=0.0)
    assert out["steps"]["1"]["status"] == "failed" and out["steps"]["1"]["attempts"] == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_skip_goes_on_without_the_step_where_its_output_is_not_needed(use_models, ctx, mode):
    plan = plan_of(
        {**step(1, "always_fails", {}), "on_failure": "skip"},
        step(2, "echo", {"text": "uses $1"}),  # needs step 1's output: skipped
        step(3, "echo", {"text": "after 1, not its output"}, [1]),  # runs
        step(4, "echo", {"text": "independent"}),
    )
    out = run(use_models, ctx, plan, mode=mode)  # replans allowed: none is made
    records = out["steps"]
    assert [records[str(i)]["status"] for i in range(1, 5)] == [
        "failed",
        "skipped",
        "succeeded",
        "succeeded",
    ]
    assert "replanner" not in out["usage"]
    assert out["final"]["status"] == "partial"
    assert "on_failure: skip" in out["final"]["answer"], out["final"]["answer"]


def test_a_failure_the_plan_did_not_say_to_skip_still_replans(use_models, ctx):
    plan = plan_of(
        {**step(1, "always_fails", {}), "on_failure": "skip"},
        step(2, "always_fails", {}),
    )
    out = run(use_models, ctx, plan, max_replans=0)
    assert out["evaluation"]["decision"] == "give_up"
    assert "[2]" in out["evaluation"]["reason"]


@pytest.mark.parametrize(
    "policy, error",
    [
        ({"retry": 9}, "less than or equal to 5"),
        ({"retry": 0}, "greater than or equal to 1"),
        ("sometimes", "on_failure"),
        ({"retry": 2, "then": "skip"}, "on_failure"),
    ],
)
def test_a_wrong_on_failure_is_refused_at_approval_not_at_run_time(ctx, policy, error):
    from planexec.plan import PlanValidationError, validate_plan

    bad = plan_of({**step(1, "echo", {"text": "x"}), "on_failure": policy})
    with pytest.raises(PlanValidationError, match=error):
        validate_plan(bad, TOOLS, max_steps=10)
    compact = {"goal": "g", "steps": [{"echo": {"text": "x"}, "on_failure": policy}]}
    with pytest.raises(PlanValidationError, match=error):
        validate_plan(compact, TOOLS, max_steps=10)


def test_a_reviewer_sets_on_failure_by_editing_the_plan(use_models, ctx):
    FLAKY_FAILS["left"] = 1
    plan = plan_of(step(1, "flaky", {"text": "ok"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config, context = thread(), ctx(max_replans=0, retry_initial_interval=0.0)
    graph.invoke({"task": "t"}, config, context=context)
    edited = plan_of({**step(1, "flaky", {"text": "ok"}), "on_failure": {"retry": 1}})
    out = graph.invoke(Command(resume={"action": "edit", "plan": edited}), config, context=context)
    assert out["final"]["status"] == "succeeded" and out["steps"]["1"]["attempts"] == 2
    refused = plan_of({**step(1, "flaky", {"text": "ok"}), "on_failure": {"retry": 99}})
    graph2 = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    use_models(planner=scripted(plan_reply(plan)))
    config2 = thread()
    graph2.invoke({"task": "t"}, config2, context=context)
    again = graph2.invoke(
        Command(resume={"action": "edit", "plan": refused}), config2, context=context
    )
    assert "on_failure" in again["__interrupt__"][0].value["error"]
