from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import ConfigurationError
from planexec.llm.models import MISSING_KEY
from planexec.llm.scripted import ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, scripted, step, thread

runs: list[str] = []


@tool
def count(label: str) -> str:
    """Record that it ran; return the label."""
    runs.append(label)
    return label


count.metadata = {"side_effects": False}  # declared harmless


@pytest.fixture
def graph():
    runs.clear()
    return build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([echo, always_fails, count])
    )


def approve(graph, ctx_obj, config):
    out = graph.invoke({"task": "t"}, config, context=ctx_obj)
    assert "__interrupt__" in out
    return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj)


FAILING = plan_of(
    step(1, "always_fails", {"reason": "disk full"}),
    step(2, "count", {"label": "after ${1}"}, [1]),
    step(3, "count", {"label": "independent"}),
)


def test_failure_skips_dependents_then_replans_around_it(graph, use_models, ctx):
    planner = use_models(
        planner=scripted(
            plan_reply(FAILING),
            plan_reply(plan_of(step(4, "count", {"label": "instead, using ${3}"}, [3]))),
        )
    )["planner"]
    config = thread()
    out = approve(graph, ctx(), config)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert runs == ["independent", "instead, using independent"]  # step 3 never ran twice
    assert set(out["steps"]) == {"3", "4"}
    replan_prompt = planner.prompts[1]
    assert "it failed: disk full" in replan_prompt and "step 2" in replan_prompt
    state = graph.get_state(config).values
    assert state["replans"] == 1 and state["plan"]["version"] == 2
    [revision] = state["revisions"]
    assert revision["outcomes"]["2"]["status"] == "skipped"
    assert revision["reason"].startswith("replanned after failures: step 1")


def test_replan_limit_gives_a_partial_result(graph, use_models, ctx):
    use_models(
        planner=scripted(
            plan_reply(FAILING),
            plan_reply(plan_of(step(4, "always_fails", {"reason": "still full"}))),
        )
    )
    out = approve(graph, ctx(max_replans=1), thread())
    assert out["final"]["status"] == "partial"
    assert "replan limit (1) is reached" in out["final"]["answer"]
    assert (
        "step 4 [always_fails] failed: ValueError: it failed: still full" in out["final"]["answer"]
    )
    assert runs == ["independent"]


def test_a_revision_repeating_the_failure_stops_instead_of_looping(graph, use_models, ctx):
    same = plan_of({**FAILING["steps"][0], "id": 7})
    use_models(planner=scripted(plan_reply(FAILING), plan_reply(same)))
    config = thread()
    out = approve(graph, ctx(max_replans=5), config)
    assert out["final"]["status"] == "partial"
    assert "same failing steps again" in out["final"]["answer"]
    assert graph.get_state(config).values["replans"] == 1


def test_revision_adding_a_side_effecting_tool_needs_approval_again(use_models, ctx):
    registry = ToolRegistry([echo, always_fails])
    registry.register(count, side_effects=True)
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    use_models(
        planner=scripted(
            plan_reply(plan_of(step(1, "always_fails", {}), step(2, "echo", {"text": "x"}))),
            plan_reply(plan_of(step(3, "count", {"label": "side effect"}))),
        )
    )
    config = thread()
    out = approve(graph, ctx(approval="first"), config)
    value = out["__interrupt__"][0].value
    assert value["version"] == 2 and value["side_effect_tools"] == ["count"]
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"


def test_an_invalid_plan_is_repaired_by_the_planner(graph, use_models, ctx):
    broken = plan_of(step(1, "nope"), step(2, "echo", {"text": "$1"}, [2]))
    planner = use_models(
        planner=scripted(
            plan_reply(broken),
            ScriptedReply(
                content="```json\n" + '{"goal": "g", "steps": [{"id": 1, "tool": "echo", '
                '"args": {"text": "fixed"}, "description": "d"}]}' + "\n```"
            ),
        )
    )["planner"]
    config = thread()
    out = graph.invoke({"task": "t"}, config, context=ctx())
    assert out["__interrupt__"][0].value["plan"]["steps"][0]["args"] == {"text": "fixed"}
    assert "unknown tool 'nope'" in planner.prompts[1]
    assert "step 2 depends on itself" in planner.prompts[1]


def test_a_planner_that_never_gets_it_right_ends_with_a_clear_error(graph, use_models, ctx):
    use_models(planner=scripted(*[ScriptedReply(content="I think we should...")] * 3))
    config = thread()
    out = graph.invoke({"task": "t"}, config, context=ctx(max_plan_repairs=2))
    assert out["final"]["status"] == "failed"
    assert out["error"].startswith("the planner gave no valid plan in 3 attempts")
    assert graph.get_state(config).next == ()


def test_llm_judge_costs_one_call_per_round_and_retries_a_rejected_step(graph, use_models, ctx):
    plan = plan_of(
        step(1, "count", {"label": "a"}, expected="the letter a"),
        step(2, "count", {"label": "b"}, expected="the letter b"),
        step(3, "count", {"label": "c"}, expected="the letter c"),
    )
    judge = scripted(
        ScriptedReply(
            tool_calls=[
                {
                    "name": "Verdicts",
                    "args": {
                        "verdicts": [
                            {"step": 1, "ok": True},
                            {"step": 2, "ok": False, "reason": "looks wrong"},
                            {"step": 3, "ok": True},
                        ]
                    },
                }
            ]
        ),
        ScriptedReply(
            tool_calls=[{"name": "Verdicts", "args": {"verdicts": [{"step": 2, "ok": True}]}}]
        ),
    )
    use_models(planner=scripted(plan_reply(plan)), evaluator=judge)
    config = thread()
    out = approve(graph, ctx(llm_judge=True), config)
    assert out["final"]["status"] == "succeeded"
    assert sorted(runs) == ["a", "b", "b", "c"]
    assert graph.get_state(config).values["usage"]["evaluator"]["calls"] == 2
    assert "looks wrong" not in str(out["steps"])


def test_missing_api_key_is_one_clear_line(graph, ctx):
    with pytest.raises(ConfigurationError) as info:
        graph.invoke({"task": "t"}, thread(), context=ctx(planner_model="openai:gpt-4.1"))
    assert str(info.value) == MISSING_KEY and "\n" not in MISSING_KEY


def test_editing_a_revision_reruns_changed_steps_and_their_dependents_only(graph, use_models, ctx):
    first = plan_of(
        step(1, "count", {"label": "a"}),
        step(2, "count", {"label": "got ${1}"}, [1]),
        step(3, "count", {"label": "c"}),
        step(4, "always_fails", {}),
    )
    use_models(
        planner=scripted(
            plan_reply(first), plan_reply(plan_of(step(5, "count", {"label": "fixed"})))
        )
    )
    config = thread()
    out = approve(graph, ctx(approval="always"), config)  # 4 fails -> replan -> asks again
    revised = out["__interrupt__"][0].value["plan"]
    assert [s["id"] for s in revised["steps"]] == [1, 2, 3, 5]
    edited = {
        "goal": revised["goal"],
        "steps": [{**s, "args": {"label": "b"}} if s["id"] == 1 else s for s in revised["steps"]],
    }
    out = graph.invoke(
        Command(resume={"action": "edit", "plan": edited}), config, context=ctx(approval="always")
    )
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == "got b"
    assert sorted(runs) == sorted(["a", "got a", "c", "b", "got b", "fixed"])  # 3 kept, not re-run
