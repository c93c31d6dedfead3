"""Every loop ends, and post-hoc checks leave a consistent plan (issue 9, section 4)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.llm.scripted import ScriptedReply
from planexec.tools import ToolRegistry, default_registry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

calls: Counter[str] = Counter()


@tool
def tick(label: str) -> str:
    """Return the label and how many times this label has been ticked."""
    calls[label] += 1
    return f"{label}#{calls[label]}"


@tool
def claims_file(name: str) -> dict:
    """Say a file was written (it was not)."""
    return {"path": name, "rows": 3}


@tool
def locators() -> dict:
    """Return values whose keys end in 'path' but are not workspace files."""
    return {"xpath": "//div[@id='main']", "api_path": "/v1/users/42", "path_count": 3}


@pytest.fixture
def graph():
    calls.clear()
    registry = ToolRegistry()
    for harmless in (tick, echo, locators):
        registry.register(harmless, side_effects=False)
    registry.register(claims_file, side_effects=False, file_fields=["path"])
    return build_graph(checkpointer=InMemorySaver(), tools=registry, approval="never")


def approve(graph, ctx_obj, config):
    """Run asking for the approval of the first plan (stricter than the operator's never)."""
    ctx_obj = dataclasses.replace(ctx_obj, approval=ctx_obj.approval or "first")
    out = graph.invoke({"task": "t"}, config, context=ctx_obj)
    assert "__interrupt__" in out
    return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj)


def verdicts(*items: tuple[int, bool], match: str | None = None) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[
            {
                "name": "Verdicts",
                "args": {"verdicts": [{"step": s, "ok": ok, "reason": "no"} for s, ok in items]},
            }
        ],
        match=match,
    )


def test_a_judge_that_always_rejects_gets_one_retry_then_the_run_ends(graph, use_models, ctx):
    judge = scripted(verdicts((1, False), match="."))  # answers every prompt: rejects step 1
    plan = plan_of(step(1, "tick", {"label": "a"}))
    use_models(planner=scripted(plan_reply(plan)), evaluator=judge)
    config = thread()
    out = approve(graph, ctx(llm_judge=True, max_replans=0), config)
    assert out["final"]["status"] == "failed"
    assert calls["a"] == 2  # the first run and one retry, not 99
    assert len(judge.prompts) == 2
    assert out["steps"]["1"]["error"] == "judge: no"
    assert graph.get_state(config).next == ()


def test_a_judge_retry_reruns_the_dependents_of_the_rejected_step(graph, use_models, ctx):
    plan = plan_of(
        step(1, "tick", {"label": "a"}),
        step(2, "tick", {"label": "got ${1}"}, [1]),
        step(3, "tick", {"label": "c"}),
        step(4, "tick", {"label": "after ${2}"}, [2]),
    )
    judge = scripted(verdicts((1, False), (2, True), (3, True), (4, True)), verdicts())
    use_models(planner=scripted(plan_reply(plan)), evaluator=judge)
    out = approve(graph, ctx(llm_judge=True, max_replans=0), thread())
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["steps"]["1"]["output"] == "a#2"
    assert out["steps"]["2"]["output"] == "got a#2#1"  # built on the re-run step 1
    assert out["steps"]["4"]["output"] == "after got a#2#1#1"
    assert calls["c"] == 1  # unrelated to step 1: not re-run
    second = judge.prompts[1]
    assert '"step": 1' in second and '"step": 2' in second and '"step": 4' in second
    assert '"step": 3' not in second


def test_a_rejected_dependent_after_the_retry_ends_the_round(graph, use_models, ctx):
    plan = plan_of(step(1, "tick", {"label": "a"}), step(2, "tick", {"label": "got ${1}"}, [1]))
    judge = scripted(verdicts((1, False), (2, True)), verdicts((1, True), (2, False)))
    use_models(planner=scripted(plan_reply(plan)), evaluator=judge)
    out = approve(graph, ctx(llm_judge=True, max_replans=0), thread())
    assert out["final"]["status"] == "partial"
    assert len(judge.prompts) == 2 and calls["a"] == 2  # one retry round per plan revision


def test_a_step_failing_a_check_after_its_dependent_ran_is_replanned_validly(
    graph, use_models, ctx
):
    plan = plan_of(
        step(1, "claims_file", {"name": "missing.csv"}),
        step(2, "echo", {"text": "read $1.path"}, [1]),
        step(3, "tick", {"label": "independent"}),
    )
    planner = use_models(
        planner=scripted(
            plan_reply(plan),
            plan_reply(plan_of(step(4, "tick", {"label": "instead, with ${3}"}, [3]))),
        )
    )["planner"]
    config = thread()
    out = approve(graph, ctx(), config)
    assert out["final"]["status"] == "succeeded", out["final"]
    state = graph.get_state(config).values
    assert [s["id"] for s in state["plan"]["steps"]] == [3, 4]  # step 2 went with step 1
    assert out["steps"]["4"]["output"] == "instead, with independent#1#1"
    assert calls["independent"] == 1
    revision = state["revisions"][0]
    assert revision["outcomes"]["1"]["error"].startswith("check failed: its output names")
    assert "step 2" in planner.prompts[1] and "depends on step 1" in planner.prompts[1]


def test_only_declared_file_fields_are_checked_as_files(graph, use_models, ctx, workspace):
    plan = plan_of(step(1, "locators"), step(2, "claims_file", {"name": "a" * 300}))
    use_models(planner=scripted(plan_reply(plan)))
    out = approve(graph, ctx(max_replans=0), thread())
    assert out["steps"]["1"]["status"] == "succeeded"
    assert out["steps"]["1"]["output"]["xpath"] == "//div[@id='main']"
    assert out["steps"]["2"]["status"] == "failed"
    assert out["steps"]["2"]["error"].startswith("check failed: its output names 'aaaa")
    assert "File name too long" in out["steps"]["2"]["error"]
    assert out["final"]["status"] == "partial"


def test_artifacts_are_the_declared_files_of_tools_with_side_effects(use_models, ctx, workspace):
    (workspace / "notes.txt").write_text("hello")
    plan = plan_of(
        step(1, "read_file", {"path": "notes.txt"}),
        step(2, "write_file", {"path": "out/copy.txt", "content": "$1.content"}, [1]),
        step(3, "list_files", {"folder": "out"}, [2]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    out = approve(graph, ctx(), thread())
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["final"]["artifacts"] == ["out/copy.txt"]


def test_the_builtin_tools_declare_their_file_fields():
    registry = default_registry()
    assert registry.file_fields("write_report") == ("path",)
    assert registry.file_fields("generate_chart") == ("path",)
    assert registry.file_fields("clean_data") == ("dataset",)
    assert registry.file_fields("load_csv") == ("dataset",)
    assert registry.file_fields("read_file") == ("path",)
    assert registry.file_fields("calculate_stats") == ()


def test_the_longest_run_the_limits_allow_ends_within_langgraphs_step_budget(
    graph, use_models, ctx
):
    # every revision is rejected by the judge, retried once, and replanned, the most times
    # max_replans allows, in one invocation (approval "never"): it must end, not hit the
    # recursion limit
    replies = [plan_reply(plan_of(step(1, "tick", {"label": "r0"})))]
    replies += [plan_reply(plan_of(step(i + 1, "tick", {"label": f"r{i}"}))) for i in range(1, 31)]
    judge = scripted(*[verdicts((i, False), match=f'"step": {i},') for i in range(1, 32)])
    use_models(planner=scripted(*replies), evaluator=judge)
    config = thread()
    out = graph.invoke(
        {"task": "t"}, config, context=ctx(llm_judge=True, approval="never", max_replans=30)
    )
    assert out["final"]["status"] == "failed"
    assert "replan limit (30) is reached" in out["final"]["answer"]
    state = graph.get_state(config).values
    assert state["replans"] == 30 and state["plan"]["version"] == 31
    assert sum(calls.values()) == 62  # every revision's step ran twice (one judge retry)
