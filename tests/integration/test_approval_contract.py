"""The approval is a contract: what runs is exactly what a human approved, once.

Each test drives the graph as a Python user would (``build_graph(...).invoke``, ``update_state``,
``Command(resume=...)``) and checks what ran, through a tool that records its calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.plan.doc import plan_digest
from planexec.tools import ToolRegistry
from planexec.tools.files import write_file
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

CALLS: list[str] = []


@tool
def record(text: str) -> str:
    """Record that this step ran; return the text."""
    CALLS.append(text)
    return text


record.metadata = {"side_effects": False}  # declared harmless


@pytest.fixture
def graph():
    CALLS.clear()
    registry = ToolRegistry([echo, record])
    registry.register(write_file, side_effects=True)
    return build_graph(checkpointer=InMemorySaver(), tools=registry)


def ask(graph, ctx, config, task="t"):
    out = graph.invoke({"task": task}, config, context=ctx())
    return out["__interrupt__"][0].value


def resume(graph, ctx, config, answer):
    return graph.invoke(Command(resume=answer), config, context=ctx())


READ = plan_of(step(1, "record", {"text": "first task"}))
WRITE = plan_of(step(1, "write_file", {"path": "out.txt", "content": "second task"}))


# 1. A new task on a thread that already approved a plan asks again.
def test_a_new_task_on_the_same_thread_needs_its_own_approval(graph, use_models, ctx, workspace):
    use_models(planner=scripted(plan_reply(READ), plan_reply(WRITE)))
    config = thread()
    asked = ask(graph, ctx, config)
    done = resume(graph, ctx, config, {"action": "approve", "digest": asked["digest"]})
    assert done["final"]["status"] == "succeeded"

    out = graph.invoke({"task": "now write"}, config, context=ctx())  # policy "first"
    assert "__interrupt__" in out, "the second task's plan ran without approval"
    assert not (workspace / "out.txt").exists()
    state = graph.get_state(config).values
    assert state["approved"] is None and state["final"] is None
    assert state["revisions"][-1]["reason"] == "a new task was given: now write"


# 2. A plan put into state is validated and approved before it runs.
def test_a_plan_edited_into_state_at_the_interrupt_must_be_approved(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    sneaky = {**asked["plan"], "steps": [step(1, "record", {"text": "never shown"})]}
    graph.update_state(config, {"plan": sneaky})  # Studio's "edit state"
    out = resume(graph, ctx, config, {"action": "approve", "digest": asked["digest"]})
    again = out["__interrupt__"][0].value
    assert "approval" in graph.get_state(config).next
    stored = graph.get_state(config).values["plan"]  # the edit, in its canonical form
    assert stored["steps"][0]["args"] == {"text": "never shown"}
    assert again["digest"] == plan_digest(stored) != asked["digest"]
    assert again["origin"] == "state edit"
    assert "digest" in again["error"]
    assert CALLS == []
    done = resume(graph, ctx, config, {"action": "approve", "digest": again["digest"]})
    assert done["final"]["status"] == "succeeded" and CALLS == ["never shown"]


@pytest.mark.parametrize(
    "steps, problem",
    [
        ([step(1, "no_such_tool")], "unknown tool 'no_such_tool'"),
        ([step(1, "record", {"text": "a"}, [2]), step(2, "record", {"text": "b"}, [1])], "cycle"),
        ([step(1, "record", {})], "text"),
    ],
    ids=["unknown-tool", "cycle", "missing-arg"],
)
def test_an_invalid_plan_in_state_cannot_be_approved(graph, use_models, ctx, steps, problem):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    graph.update_state(config, {"plan": {**asked["plan"], "steps": steps}})
    out = resume(graph, ctx, config, "approve")
    again = out["__interrupt__"][0].value
    assert any(problem in p for p in again["problems"])
    out = resume(graph, ctx, config, "approve")
    again = out["__interrupt__"][0].value
    assert "cannot be approved" in again["error"] and CALLS == []
    done = resume(graph, ctx, config, {"action": "cancel"})
    assert done["final"]["status"] == "cancelled" and CALLS == []


def test_state_edits_cannot_approve_or_forge_records(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    forged = {"version": 1, "digest": asked["digest"], "by": "reviewer", "tools": []}
    for values in (
        {"approved": forged},
        {"approval": {"action": "approve"}},
        {"steps": {"1": {"status": "succeeded", "output": "forged"}}},
    ):
        with pytest.raises(InvalidInputError, match="only feedback, plan, task can be edited"):
            graph.update_state(config, values)
        with pytest.raises(InvalidInputError, match="only feedback, plan, task can be edited"):
            graph.invoke(Command(update=values, resume="approve"), config, context=ctx())
    with pytest.raises(InvalidInputError, match="not a plan document"):
        graph.update_state(config, {"plan": {"version": 1, "steps": "nope"}})
    assert CALLS == [] and graph.get_state(config).next == ("approval",)


def test_a_fork_as_approval_that_adds_a_write_does_not_run_it(
    graph, use_models, ctx, workspace: Path
):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    resume(graph, ctx, config, {"action": "approve", "digest": asked["digest"]})
    asking = [h for h in graph.get_state_history(config) if h.next == ("approval",)]
    at_approval = asking[-1].config  # as the planner left it (later: the plan shown in the chat)
    added = {
        **asked["plan"],
        "steps": [
            *asked["plan"]["steps"],
            step(2, "write_file", {"path": "x.txt", "content": "!"}),
        ],
    }
    fork = graph.update_state(at_approval, {"plan": added}, as_node="approval")
    out = graph.invoke(None, fork, context=ctx())
    again = out["__interrupt__"][0].value
    assert again["error"].startswith("PlanNotApprovedError:")
    assert not (workspace / "x.txt").exists()
    assert again["side_effect_tools"] == ["write_file"]
    assert graph.get_state(fork).values["approved"] is None
    # forked where the plan was already shown in the chat: asked again, not run either
    fork = graph.update_state(asking[0].config, {"plan": added}, as_node="approval")
    again = graph.invoke(None, fork, context=ctx())["__interrupt__"][0].value
    assert again["side_effect_tools"] == ["write_file"] and again["origin"] == "state edit"
    assert not (workspace / "x.txt").exists()


# 3. Answers are bound to what the reviewer saw.
def test_an_answer_naming_an_older_version_does_not_approve_the_new_one(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ), plan_reply(WRITE)))
    config = thread()
    v1 = ask(graph, ctx, config)
    out = resume(graph, ctx, config, {"action": "reject", "feedback": "write instead"})
    v2 = out["__interrupt__"][0].value
    assert v2["version"] == 2
    for stale in (
        {"action": "approve", "version": 1},
        {"action": "approve", "digest": v1["digest"]},
    ):
        out = resume(graph, ctx, config, stale)
        again = out["__interrupt__"][0].value
        assert again["version"] == 2 and "awaiting approval" in again["error"]
    assert graph.get_state(config).values["approved"] is None
    edit_of_v1 = {"action": "edit", "plan": v1["plan"]}  # carries version 1 as shown
    again = resume(graph, ctx, config, edit_of_v1)["__interrupt__"][0].value
    assert "version 1" in again["error"]


# 4. A refused answer stays refused, whatever context a later call brings.
def test_a_refused_edit_is_never_accepted_later(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    ask(graph, ctx, config)
    two_steps = plan_of(step(1, "record", {"text": "a"}), step(2, "record", {"text": "b"}))
    out = graph.invoke(
        Command(resume={"action": "edit", "plan": two_steps}), config, context=ctx(max_steps=1)
    )
    assert "at most 1 are allowed" in out["__interrupt__"][0].value["error"]
    out = graph.invoke(Command(resume={"action": "cancel"}), config, context=ctx(max_steps=5))
    assert out["final"]["status"] == "cancelled"
    assert CALLS == []
    assert [s["args"] for s in graph.get_state(config).values["plan"]["steps"]] == [
        {"text": "first task"}
    ]


# 9. The plan shown can be sent back as an edit.
def test_the_plan_as_shown_can_be_sent_back_as_an_edit(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    shown = {**asked["plan"], "digest": asked["digest"]}
    shown["steps"] = [{**shown["steps"][0], "args": {"text": "edited"}}]
    done = resume(graph, ctx, config, {"action": "edit", "plan": shown})
    assert done["final"]["status"] == "succeeded" and CALLS == ["edited"]


def test_a_replanned_plan_larger_than_max_steps_can_be_resent(graph, use_models, ctx):
    escape = {"path": "../outside.txt", "content": "x"}  # refused by the workspace: step 2 fails
    first = plan_of(step(1, "record", {"text": "kept"}), step(2, "write_file", escape))
    revision = plan_of(step(3, "record", {"text": "new a"}), step(4, "record", {"text": "new b"}))
    use_models(planner=scripted(plan_reply(first), plan_reply(revision)))
    config = thread()
    context = ctx(max_steps=2, approval="always")
    asked = graph.invoke({"task": "t"}, config, context=context)["__interrupt__"][0].value
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    v2 = out["__interrupt__"][0].value
    assert v2["version"] == 2 and len(v2["plan"]["steps"]) == 3 and asked["version"] == 1
    done = graph.invoke(
        Command(resume={"action": "edit", "plan": v2["plan"]}), config, context=context
    )
    assert done["final"]["status"] == "succeeded"
    assert sorted(CALLS) == ["kept", "new a", "new b"]  # 3 and 4 run in parallel


def test_a_plan_edited_in_as_the_executor_is_neither_run_nor_reported_as_done(
    graph, use_models, ctx
):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    resume(graph, ctx, config, {"action": "approve", "digest": asked["digest"]})
    other = {**asked["plan"], "steps": [step(1, "record", {"text": "other"})]}
    graph.update_state(config, {"plan": other}, as_node="executor")
    out = graph.invoke(None, config, context=ctx())
    again = out["__interrupt__"][0].value  # back at approval, not "succeeded" on stale results
    assert again["error"].startswith("PlanNotApprovedError:") and CALLS == ["first task"]


# Found by a hostile review: each of these ran an unapproved step before it was fixed.
def test_a_command_cannot_route_around_the_approval(graph, use_models, ctx):
    from langgraph.types import Send

    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    evil = {**asked["plan"], "steps": [step(1, "record", {"text": "forged"})]}
    forged = {"plan": evil, "approved": {"version": 1, "digest": plan_digest(evil), "by": "x"}}
    for command in (
        Command(goto=Send("executor", {"task": "t", **forged})),
        Command(goto="executor"),
        Command(update={"task": "new"}, goto="replanner"),
    ):
        with pytest.raises(InvalidInputError, match="routes its own runs"):
            graph.invoke(command, config, context=ctx())
    assert CALLS == [] and graph.get_state(config).next == ("approval",)


FAILS = {"path": "../outside.txt", "content": "x"}  # the workspace refuses it: the step fails


def test_a_replan_of_a_plan_edited_after_approval_needs_a_human(graph, use_models, ctx):
    v1 = plan_of(step(1, "record", {"text": "approved"}), step(2, "write_file", FAILS))
    revision = plan_of(step(3, "record", {"text": "never approved"}))
    use_models(planner=scripted(plan_reply(v1), plan_reply(revision)))
    config = thread()
    asked = ask(graph, ctx, config)
    done = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx(max_replans=0))
    assert done["final"]["status"] == "partial" and CALLS == ["approved"]
    edited = {**graph.get_state(config).values["plan"], "goal": "something else entirely"}
    graph.update_state(config, {"plan": edited}, as_node="executor")
    out = graph.invoke(None, config, context=ctx(max_replans=2))
    assert "__interrupt__" in out, "a revision of an unapproved plan ran unasked"
    assert CALLS == ["approved"] and asked["version"] == 1


def test_a_revision_adding_a_side_effecting_step_needs_a_human(graph, use_models, ctx, workspace):
    v1 = plan_of(
        step(1, "write_file", {"path": "a.txt", "content": "approved"}),
        step(2, "write_file", FAILS),
    )
    revision = plan_of(step(3, "write_file", {"path": "z.txt", "content": "never shown"}))
    use_models(planner=scripted(plan_reply(v1), plan_reply(revision)))
    config = thread()
    ask(graph, ctx, config)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["__interrupt__"][0].value["version"] == 2
    assert (workspace / "a.txt").exists() and not (workspace / "z.txt").exists()


def test_a_client_cannot_lower_the_operators_approval_policy(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ), plan_reply(READ)))
    config = thread()
    ask(graph, ctx, config)
    resume(graph, ctx, config, {"action": "launch"})  # refused: asked again
    out = graph.invoke(None, config, context=ctx(approval="never"))
    assert "__interrupt__" in out and CALLS == []
    out = graph.invoke({"task": "again"}, thread(), context=ctx(approval="never"))
    assert "__interrupt__" in out and CALLS == []


def test_a_version_does_not_name_a_plan_changed_by_a_state_edit(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    same_version = {**asked["plan"], "steps": [step(1, "record", {"text": "swapped"})]}
    graph.update_state(config, {"plan": same_version})
    out = resume(graph, ctx, config, {"action": "approve", "version": asked["version"]})
    assert "answer with its digest" in out["__interrupt__"][0].value["error"] and CALLS == []


@pytest.mark.parametrize(
    "bad",
    [{"depends_on": ["1"]}, {"id": 1.0}, {"id": True}, {"args": "text"}],
    ids=["string-dep", "float-id", "bool-id", "args-not-dict"],
)
def test_a_plan_edit_with_loose_types_is_refused(graph, use_models, ctx, bad):
    use_models(planner=scripted(plan_reply(READ)))
    config = thread()
    asked = ask(graph, ctx, config)
    second = {**step(2, "record", {"text": "b"}), **bad}
    with pytest.raises(InvalidInputError, match="not a plan document"):
        graph.update_state(config, {"plan": {**asked["plan"], "steps": [READ["steps"][0], second]}})
    assert graph.get_state(config).values["plan"] == asked["plan"]


def test_scripted_models_read_only_the_operators_folder(use_models, ctx, tmp_path, monkeypatch):
    from planexec.errors import ConfigurationError
    from planexec.llm import models

    outside = tmp_path.parent.parent / "elsewhere.json"
    with pytest.raises(ConfigurationError, match="outside PLANEXEC_SCRIPTED_DIR"):
        models.provider_model(f"scripted:{outside}")
    with pytest.raises(ConfigurationError, match="outside PLANEXEC_SCRIPTED_DIR"):
        models.provider_model("scripted:/etc/passwd")
    monkeypatch.delenv("PLANEXEC_SCRIPTED_DIR")
    with pytest.raises(ConfigurationError, match="scripted models are off"):
        models.provider_model(f"scripted:{tmp_path / 'x.json'}")
