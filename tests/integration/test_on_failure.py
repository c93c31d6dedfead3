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
        step(2, "echo", {"text": "uses ${1}"}),  # needs step 1's output: skipped
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


# -- on_failure: "ask" ----------------------------------------------------------------------

ASK_PLAN = plan_of(
    {**step(1, "flaky", {"text": "first"}), "on_failure": "ask"},
    step(2, "echo", {"text": "independent"}),
    step(3, "echo", {"text": "uses ${1}"}),
)


PLANNER: dict = {}


def asked(use_models, ctx, plan=ASK_PLAN, *, fails=5, saver=None, **settings):
    """Run to the question about the failed step; return the graph, config, context, payload."""
    FLAKY_FAILS["left"] = fails
    PLANNER["model"] = scripted(
        plan_reply(plan), plan_reply(plan_of(step(4, "echo", {"text": "new"})))
    )
    use_models(planner=PLANNER["model"])
    graph = build_graph(checkpointer=saver or InMemorySaver(), tools=TOOLS)
    config, context = thread(), ctx(retry_initial_interval=0.0, **settings)
    graph.invoke({"task": "t"}, config, context=context)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    return graph, config, context, out


def test_ask_puts_the_failed_step_to_a_human_after_the_other_branches_ran(use_models, ctx):
    graph, config, _, out = asked(use_models, ctx)
    request = out["__interrupt__"][0].value
    assert request["type"] == "step_failure" and request["step"]["id"] == 1
    assert "the service said no" in request["error"]
    assert request["asked"] == 1
    values = graph.get_state(config).values
    assert values["steps"]["2"]["status"] == "succeeded"  # the independent branch finished
    assert values["steps"]["3"]["status"] == "skipped"  # waits on step 1's output
    assert graph.get_state(config).next == ("failure_review",)


def test_a_whole_independent_chain_runs_before_the_question(use_models, ctx):
    """Nothing runs while a thread waits at an interrupt, so the question comes once every
    step that does not need the failed one has run, chains included; only its users wait."""
    plan = plan_of(
        {**step(1, "flaky", {"text": "first"}), "on_failure": "ask"},
        step(2, "echo", {"text": "a"}),
        step(3, "echo", {"text": "${2} then b"}, [2]),
        step(4, "echo", {"text": "${3} then c"}, [3]),
        step(5, "echo", {"text": "${4} and ${1}"}, [4]),
    )
    graph, config, _, out = asked(use_models, ctx, plan)
    assert out["__interrupt__"][0].value["step"]["id"] == 1
    steps = graph.get_state(config).values["steps"]
    assert steps["4"]["status"] == "succeeded" and steps["4"]["output"] == "a then b then c"
    assert steps["5"]["status"] == "skipped"  # it uses step 1's output: it waits


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_retry_runs_the_step_again_and_what_waited_on_it(use_models, ctx, mode):
    graph, config, context, _ = asked(use_models, ctx, fails=1)
    before = next(CALLS)
    answer = Command(resume={"action": "retry", "step": 1})
    if mode == "sync":
        out = graph.invoke(answer, config, context=context)
    else:
        out = asyncio.run(graph.ainvoke(answer, config, context=context))
    assert out["final"]["status"] == "succeeded", out["final"]
    assert next(CALLS) == before + 2  # step 1 once more, and nothing else of flaky's
    assert out["steps"]["3"]["output"] == "uses first"


def test_retry_with_edited_args_is_a_new_plan_version_shown_for_approval(use_models, ctx):
    """Changed arguments make a new plan: the approval node shows it (only it approves plans)."""
    graph, config, context, _ = asked(use_models, ctx, fails=1)
    shown = graph.invoke(
        Command(resume={"action": "retry", "step": 1, "args": {"text": "second"}}),
        config,
        context=context,
    )
    request = shown["__interrupt__"][0].value
    assert request["type"] == "plan_approval" and request["version"] == 2
    assert request["origin"] == "reviewer"
    assert request["plan"]["steps"][0]["args"] == {"text": "second"}
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["steps"]["3"]["output"] == "uses second"
    assert out["steps"]["2"]["attempts"] == 1  # kept, not run again
    assert out["revisions"][-1]["reason"] == "step 1 edited by the reviewer after it failed"


def test_skip_goes_on_without_the_step(use_models, ctx):
    graph, config, context, _ = asked(use_models, ctx)
    out = graph.invoke(Command(resume={"action": "skip", "step": 1}), config, context=context)
    assert out["final"]["status"] == "partial"
    assert out["steps"]["3"]["status"] == "skipped"
    assert "replanner" not in out["usage"]


def test_replan_with_a_hint_tells_the_replanner(use_models, ctx):
    graph, config, context, _ = asked(use_models, ctx)
    out = graph.invoke(
        Command(resume={"action": "replan", "step": 1, "hint": "use echo, flaky is down"}),
        config,
        context=context,
    )
    assert out["usage"]["replanner"]["calls"] == 1
    assert "says: use echo, flaky is down" in PLANNER["model"].prompts[-1]
    assert out["final"]["status"] == "succeeded", out["final"]
    revision = out["revisions"][-1]
    assert revision["version"] == 1


def test_cancel_ends_the_run_cancelled(use_models, ctx):
    graph, config, context, _ = asked(use_models, ctx)
    out = graph.invoke(
        Command(resume={"action": "cancel", "step": 1, "reason": "not today"}),
        config,
        context=context,
    )
    assert out["final"]["status"] == "cancelled"
    assert "not today" in out["final"]["answer"]


@pytest.mark.parametrize(
    "answer, why",
    [
        ({"action": "retry", "step": 2}, "about step 1, not 2"),
        ({"action": "fly", "step": 1}, "unknown action 'fly'"),
        ({"action": "retry", "step": 1, "args": {"text": "$9"}}, "invalid"),
        ({"action": "retry", "step": 1, "args": "text"}, "an object"),
        ({"action": "retry", "step": 1, "sudo": True}, "unknown field"),
        ("retry", "an object"),
        ({"action": "replan", "step": 1, "hint": 42}, "the hint is text"),
    ],
)
def test_a_bad_answer_is_refused_and_asked_again(use_models, ctx, answer, why):
    graph, config, context, _ = asked(use_models, ctx, fails=1)
    again = graph.invoke(Command(resume=answer), config, context=context)
    request = again["__interrupt__"][0].value
    assert request["type"] == "step_failure" and why in request["refused"], request
    out = graph.invoke(Command(resume={"action": "retry", "step": 1}), config, context=context)
    assert out["final"]["status"] == "succeeded"


def test_asks_about_one_step_are_bounded(use_models, ctx):
    graph, config, context, out = asked(use_models, ctx, fails=100, max_replans=0)
    for _ in range(2):
        out = graph.invoke(Command(resume={"action": "retry", "step": 1}), config, context=context)
        assert out["__interrupt__"][0].value["type"] == "step_failure"
    out = graph.invoke(Command(resume={"action": "retry", "step": 1}), config, context=context)
    assert "__interrupt__" not in out
    assert out["final"]["status"] == "partial"  # the third failure was not asked about


def test_the_question_survives_a_restart(use_models, ctx, tmp_path):
    from planexec.storage.persistence import sqlite_saver

    db = tmp_path / "runs.sqlite"
    with sqlite_saver(db) as saver:
        _, config, context, out = asked(use_models, ctx, fails=1, saver=saver)
        assert out["__interrupt__"][0].value["type"] == "step_failure"
    with sqlite_saver(db) as saver:  # another process, later
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        assert graph.get_state(config).next == ("failure_review",)
        out = graph.invoke(Command(resume={"action": "retry", "step": 1}), config, context=context)
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["attempts"] == 1  # not run again


def test_the_cli_asks_what_to_do_after_a_failed_step(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    plan = plan_of(
        {**step(1, "read_file", {"path": "folder"}), "on_failure": "ask"},  # a folder: fails
        step(2, "list_files", {}),
        step(3, "write_file", {"path": "copy.txt", "content": "$1.content"}),
    )
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    common = ["run", "--plan", "plan.json", "--db", "runs.sqlite"]
    for ws in ("ws", "ws2"):
        (tmp_path / ws / "folder").mkdir(parents=True)
    skipped = CliRunner().invoke(app, [*common, "--workspace", "ws"], input="y\ns\n")
    assert "step failed: step 1 (read_file)" in skipped.output, skipped.output
    assert "What now? r = retry" in skipped.output
    assert "partial" in skipped.output and skipped.exit_code == 1
    assert not (tmp_path / "ws" / "copy.txt").exists()

    (tmp_path / "ws2" / "other.txt").write_text("found")
    edited = CliRunner().invoke(
        app, [*common, "--workspace", "ws2"], input='y\ne\n{"path": "other.txt"}\ny\n'
    )
    assert edited.exit_code == 0, edited.output
    assert (tmp_path / "ws2" / "copy.txt").read_text() == "found"


def test_the_question_is_a_hitl_request_chat_uis_show(use_models, ctx):
    graph, config, context, out = asked(use_models, ctx)
    request = out["__interrupt__"][0].value
    [action] = request["action_requests"]
    assert action["name"] == "retry_failed_step" and action["args"] == {"args": {"text": "first"}}
    assert request["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    assert request["action_request"]["action"] == "retry_failed_step"
    assert "**Step 1 failed**" in request["description"]


@pytest.mark.parametrize(
    "answer, status",
    [
        ({"decisions": [{"type": "approve"}]}, "succeeded"),
        ([{"type": "accept", "args": None}], "succeeded"),
        ({"decisions": [{"type": "reject", "message": "skip"}]}, "partial"),
        ({"decisions": [{"type": "reject"}]}, "cancelled"),
        ([{"type": "ignore", "args": None}], "cancelled"),
        ({"decisions": [{"type": "reject", "message": "use echo instead"}]}, "succeeded"),
    ],
)
def test_hitl_answers_are_read_like_planexecs_own(use_models, ctx, answer, status):
    graph, config, context, _ = asked(use_models, ctx, fails=1)
    out = graph.invoke(Command(resume=answer), config, context=context)
    assert out["final"]["status"] == status, out["final"]


def test_a_hitl_edit_of_the_args_retries_with_them_after_approval(use_models, ctx):
    graph, config, context, _ = asked(use_models, ctx, fails=1)
    edit = {
        "decisions": [
            {
                "type": "edit",
                "edited_action": {"name": "retry_failed_step", "args": {"args": '{"text": "hi"}'}},
            }
        ]
    }
    shown = graph.invoke(Command(resume=edit), config, context=context)
    assert shown["__interrupt__"][0].value["plan"]["steps"][0]["args"] == {"text": "hi"}
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["steps"]["3"]["output"] == "uses hi"


def test_the_description_shows_an_error_as_text_not_markdown(use_models, ctx):
    from planexec.review.failure import describe_failure

    text = describe_failure(
        step(1, "echo", {"text": "[x](http://e.example)"}), "![a](http://e.example/i.png)"
    )
    assert "![a]" not in text and "\\!\\[a\\]" in text
    assert "[x](" not in text


def test_a_plan_edited_into_state_at_the_question_goes_back_to_approval(use_models, ctx):
    graph, config, context, _ = asked(use_models, ctx)
    cyclic = plan_of(step(1, "echo", {"text": "$2"}, [2]), step(2, "echo", {"text": "$1"}, [1]))
    graph.update_state(config, {"plan": {**cyclic, "version": 1}})
    out = graph.invoke(Command(resume={"action": "retry", "step": 1}), config, context=context)
    request = out["__interrupt__"][0].value
    assert request["type"] == "plan_approval" and request["problems"], request
    assert graph.get_state(config).next == ("approval",)


def test_the_cli_cancels_at_the_question_and_yes_answers_replan(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    plan = plan_of(
        {**step(1, "read_file", {"path": "folder"}), "on_failure": "ask"},  # a folder: fails
        step(2, "list_files", {}),
    )
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    revised = plan_of(step(3, "write_file", {"path": "replanned.txt", "content": "x"}))
    (tmp_path / "replan.json").write_text(
        json.dumps([{"tool_calls": [{"name": "Plan", "args": revised}]}])
    )
    common = ["run", "--plan", "plan.json", "--db", "runs.sqlite"]
    common += ["--planner-model", f"scripted:{tmp_path / 'replan.json'}"]
    for ws in ("ws", "ws2"):
        (tmp_path / ws / "folder").mkdir(parents=True)
    cancelled = CliRunner().invoke(app, [*common, "--workspace", "ws"], input="y\nc\n")
    assert "What now? r = retry" in cancelled.output, cancelled.output
    assert "cancelled" in cancelled.output and cancelled.exit_code != 0, cancelled.output
    assert not (tmp_path / "ws" / "replanned.txt").exists()

    replanned = CliRunner().invoke(app, [*common, "--workspace", "ws2", "--yes"])
    assert "replanning (--yes" in replanned.output, replanned.output
    assert (tmp_path / "ws2" / "replanned.txt").read_text() == "x"
