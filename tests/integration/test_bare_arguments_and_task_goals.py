"""Shorthand plans under attack: bare arguments, and a goal left out (the task's is used).

Tests marked FINDING fail on the commit they attack (0a05bac); the others pin attacks that held.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.llm.scripted import ScriptedChatModel
from planexec.plan import PlanValidationError, validate_plan
from planexec.tools import ToolRegistry
from tests import leaky
from tests.helpers import echo, plan_reply, scripted, thread
from tests.integration.test_sync_and_async_runs_match import leaked

RAN: list[Any] = []


@tool
def top_rows(n: int) -> str:
    """Return the top n rows."""
    RAN.append(n)
    return f"top {n}"


@tool
def pair(a: str, b: str) -> str:
    """Join two texts (two required arguments: no bare value)."""
    RAN.append((a, b))
    return a + b


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    RAN.clear()


def graph_with(planner: ScriptedChatModel, *, store: Any = None, approval: str = "first") -> Any:
    return build_graph(
        InMemorySaver(),
        store=store,
        tools=ToolRegistry([echo, top_rows, pair]),
        approval=approval,  # type: ignore[arg-type]
        models={"planner": planner, "executor": scripted(), "evaluator": scripted()},
    )


def run(graph: Any, value: Any, config: dict[str, Any], asynchronous: bool, **kw: Any) -> Any:
    context = kw.pop("context", Context())
    if asynchronous:
        return asyncio.run(graph.ainvoke(value, config, context=context))
    return graph.invoke(value, config, context=context)


# --------------------------------------------------------------------------------------------
# FINDING 1: the goal taken from the task's first line copies an env secret into the plan
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_secret_in_the_tasks_first_line_never_reaches_the_plans_goal(monkeypatch, asynchronous):
    """The planner model is sent the task scrubbed ([redacted]), and a goal it writes is
    scrubbed too; a goal the planner takes from the task itself is not: the raw key lands in
    ``plan.goal``, the approval interrupt, the approval's AI message (``messages`` stream), the
    ``updates`` stream and the checkpoints. The task text itself may stay as the user gave it
    (the contract of ``test_sync_and_async_runs_match.leaked``); nothing derived from it may
    hold the key.
    """
    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    task = f"Check the service with key {leaky.SECRET}\nthen say hi"
    planner = scripted(plan_reply({"steps": [{"echo": "hi"}]}))
    graph = graph_with(planner)
    config = thread()

    async def astream() -> list[Any]:
        return [
            c
            async for c in graph.astream(
                {"task": task}, config, context=Context(), stream_mode=["updates", "messages"]
            )
        ]

    if asynchronous:
        chunks = asyncio.run(astream())
    else:
        chunks = list(
            graph.stream(
                {"task": task}, config, context=Context(), stream_mode=["updates", "messages"]
            )
        )
    values = graph.get_state(config).values
    assert leaky.SECRET not in str(planner.prompts)  # the model itself never saw it
    assert leaky.SECRET not in values["plan"]["goal"], values["plan"]["goal"]
    assert leaked(values, task) == []
    assert leaked(chunks, task) == []


def test_a_goal_cut_at_its_length_limit_holds_no_piece_of_a_secret(monkeypatch):
    """The goal is the first line cut at 200 characters: a key that straddles the cut leaves
    its first characters in the goal, where no redaction of the whole key can find them. The
    goal must be scrubbed before it is cut (or not taken from the task)."""
    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    first_line = "x" * 185 + " " + leaky.SECRET  # the key spans characters 186..211
    task = first_line + "\nsecond line"
    graph = graph_with(scripted(plan_reply({"steps": [{"echo": "hi"}]})))
    config = thread()
    graph.invoke({"task": task}, config, context=Context())
    goal = graph.get_state(config).values["plan"]["goal"]
    assert leaky.SECRET[:10] not in goal, goal  # "sk-test-SE…" is a piece of the key


# --------------------------------------------------------------------------------------------
# FINDING 2: plan memory reuses a template whose number never reached the plan
# --------------------------------------------------------------------------------------------


def test_a_remembered_goal_from_the_task_never_claims_a_value_the_plan_ignores():
    """First run: "Show the top 15 rows", plan {"steps": [{"top_rows": 15}]} (bare int, no
    goal). Its goal is the task's line, so "15" is found in the plan's text and becomes a
    template parameter, though the plan's only use of it is the integer argument (which
    templates never fill). Second run: "Show the top 20 rows" is then "the same shape": no
    model call, and the approval says goal "Show the top 20 rows", changes ["15 → 20"], while
    the step that runs is top_rows(n=15). With an explicit goal the same plans go to the planner
    and run top_rows(n=20). What the approval claims must be what runs.
    """
    store = InMemoryStore()
    first = graph_with(scripted(plan_reply({"steps": [{"top_rows": 15}]})), store=store)
    config = thread()
    first.invoke({"task": "Show the top 15 rows"}, config, context=Context())
    done = first.invoke(Command(resume={"action": "approve"}), config, context=Context())
    assert done["final"]["status"] == "succeeded" and RAN == [15]

    planner = scripted(plan_reply({"steps": [{"top_rows": 20}]}))
    second = graph_with(planner, store=store)
    config = thread()
    asked = second.invoke({"task": "Show the top 20 rows"}, config, context=Context())
    request = asked["__interrupt__"][0].value
    shown_args = request["plan"]["steps"][0]["args"]
    claims = " ".join(
        [request["plan"]["goal"], *((request.get("memory") or {}).get("changes") or [])]
    )
    second.invoke(Command(resume={"action": "approve"}), config, context=Context())
    # the goal and the memory's list of changes say 20: the step must take 20
    assert "20" not in claims or shown_args == {"n": 20}, (claims, shown_args)
    assert RAN == [15, 20], RAN


# --------------------------------------------------------------------------------------------
# FINDING 3: a plan file / plan dict may not leave out its goal, though a task is given
# --------------------------------------------------------------------------------------------


def test_new_run_with_a_task_and_a_plan_without_goal_takes_the_tasks(tmp_path):
    """The compact format says "goal is optional: a plan without one takes the task's", and the
    planner, the replanner and an edit at approval all accept one; a plan handed to ``new_run``
    (the CLI's ``run TASK --plan FILE``) with its task is refused: "goal: Field required"
    (and "goal": null: "Input should be a valid string")."""
    from planexec.runs.request import new_run

    for plan in ({"steps": [{"echo": "hi"}]}, {"goal": None, "steps": [{"echo": "hi"}]}):
        request = new_run(
            "Say hi\nand nothing else", plan=plan, tools=ToolRegistry([echo]), thread_id="t-1"
        )
        assert request.plan is not None and request.plan["goal"] == "Say hi"


def test_cli_run_task_with_a_plan_file_without_goal(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    (tmp_path / "short.json").write_text(json.dumps({"steps": [{"list_files": {}}]}))
    result = CliRunner().invoke(
        app, ["run", "List my files", "--plan", "short.json", "--yes", "--workspace", "ws"]
    )
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------------------------
# FINDING 4 (not new in this commit, reached through bare values): a huge int passes validation
# --------------------------------------------------------------------------------------------


def test_an_integer_beyond_64_bits_is_refused_where_a_number_is_expected():
    """plan._parse says integers beyond 64 bits "become text (so validation reports them where a
    number is expected)"; pydantic's lax mode reads the text back as an int, so the plan is
    valid and the tool is called with a 70-bit integer (bare or in full format alike)."""
    tools = ToolRegistry([top_rows])
    for plan in (
        {"goal": "g", "steps": [{"top_rows": 2**70}]},
        {"goal": "g", "steps": [{"top_rows": {"n": 2**70}}]},
    ):
        with pytest.raises(PlanValidationError, match="n"):
            validate_plan(plan, tools, max_steps=5)


@tool("description")
def description_tool(path: str) -> str:
    """Describe a file (a tool whose name is also a step field)."""
    RAN.append(("description", path))
    return path


def test_a_bare_value_for_a_tool_named_like_a_step_field_is_not_silently_a_model_step():
    """A tool may be registered under a step field's name ("description"). The planner's prompt
    now says a tool with one required argument takes it bare, so it writes
    {"description": "a.csv"} to call it; that plan is valid and is a step for the executor
    MODEL whose instructions are "a.csv" (under ``never`` it runs unasked; the tool never does).
    Before bare values, {"description": {"path": "a.csv"}} was refused (a description is
    text). The name must be refused at registration, or such a step refused as ambiguous."""
    try:
        tools = ToolRegistry([echo, description_tool])
    except (ValueError, TypeError):
        return  # refusing the name at registration is a fix
    try:
        plan = validate_plan({"steps": [{"description": "a.csv"}]}, tools, max_steps=5, goal="g")
    except PlanValidationError:
        return  # refusing the ambiguous step is a fix too
    step = plan.steps[0]
    assert step.tool == "description", f"read as a model step: {step.model_dump()}"


# --------------------------------------------------------------------------------------------
# Attacks that held (kept as pins)
# --------------------------------------------------------------------------------------------

BAD_BARE = [
    ({"steps": [{"echo": None}]}, "echo argument text"),
    ({"steps": [{"echo": ["a"]}]}, "echo argument text"),
    ({"steps": [{"top_rows": float("nan")}]}, "top_rows argument n"),
    ({"steps": [{"pair": "x"}]}, "give pair's arguments as an object"),
    ({"steps": [{"echo": "x", "args": {"text": "y"}}]}, "not in 'args'"),
    ({"steps": [{"echo": "x", "pair": "y"}]}, "name one tool"),
    ({"goal": 5, "steps": [{"echo": "x"}]}, "goal"),
    ({"goal": ["a"], "steps": [{"echo": "x"}]}, "goal"),
    ({"steps": [{"echo": "$1"}]}, "depends on itself"),
]


@pytest.mark.parametrize(("plan", "error"), BAD_BARE)
def test_bad_bare_values_are_refused_clearly(plan, error):
    with pytest.raises(PlanValidationError) as exc:
        validate_plan(plan, ToolRegistry([echo, top_rows, pair]), max_steps=5, goal="task goal")
    assert any(error in e for e in exc.value.errors), exc.value.errors


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_edits_at_approval_with_bare_values_and_no_goal(asynchronous):
    """A bad edit is refused with its reason and the thread asks again; a good compact edit
    without goal keeps the plan's goal, and what runs is the edited, expanded plan."""
    graph = graph_with(scripted(plan_reply({"goal": "the plan's goal", "steps": [{"echo": "a"}]})))
    config = thread()
    run(graph, {"task": "Echo things"}, config, asynchronous)
    for bad in ({"steps": [{"pair": "x"}]}, {"goal": 5, "steps": [{"echo": "x"}]}):
        out = run(graph, Command(resume={"action": "edit", "plan": bad}), config, asynchronous)
        state = graph.get_state(config).values
        assert "edited plan is invalid" in state["approval"].get("error", ""), state["approval"]
        assert out["__interrupt__"], "the thread must ask again"
    edit = {"steps": [{"echo": "edited"}, {"pair": {"a": "$1", "b": "!"}}]}
    out = run(graph, Command(resume={"action": "edit", "plan": edit}), config, asynchronous)
    plan = graph.get_state(config).values["plan"]
    assert plan["goal"] == "the plan's goal"
    assert [s["args"] for s in plan["steps"]] == [{"text": "edited"}, {"a": "$1", "b": "!"}]
    assert out["final"]["status"] == "succeeded", out["final"]
    assert RAN == [("edited", "!")]


def test_a_bare_secret_streamed_under_never_runs_redacted_and_matches_the_plan(monkeypatch):
    """Under ``never`` a bare value holding a key starts while streaming as the whole plan has
    it ([redacted]), and the whole plan joins (no divergence, no second run)."""
    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    short = {"steps": [{"echo": f"key {leaky.SECRET}"}, {"top_rows": 3}, {"echo": "${1} again"}]}
    planner = ScriptedChatModel(replies=[plan_reply(short)], stream_chunk_chars=4)
    graph = graph_with(planner, approval="never")
    config = thread()
    out = graph.invoke({"task": "Echo a key"}, config, context=Context(approval="never"))
    assert out["final"]["status"] == "succeeded", out["final"]
    values = graph.get_state(config).values
    assert values["steps"]["1"]["output"] == "key [redacted]"
    assert values["steps"]["3"]["output"] == "key [redacted] again"
    assert RAN == [3]
    assert values["plan"]["goal"] == "Echo a key"
    assert leaky.leaks(values) == []


def test_a_goal_from_the_task_stays_the_same_through_a_replan(use_models):
    """The revision leaves out its goal: it keeps the first plan's (taken from the task)."""
    first = {"steps": [{"pair": {"a": "x", "b": "y"}}, {"top_rows": "not a number ${1}"}]}
    revision = {"steps": [{"top_rows": 2}]}
    graph = graph_with(scripted(plan_reply(first), plan_reply(revision)))
    config = thread()
    graph.invoke({"task": "Rows please\nmore"}, config, context=Context())
    out = graph.invoke(
        Command(resume={"action": "approve"}), config, context=Context(approval="first")
    )
    plan = graph.get_state(config).values["plan"]
    assert plan["goal"] == "Rows please"
    assert out["final"]["status"] == "succeeded", out["final"]
