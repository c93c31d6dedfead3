"""Plan memory: a run that succeeded leaves its approved plan as a template in the store;
a task of the same shape reuses it with no model call, a similar one with one cheap call."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from planexec import build_graph
from planexec.memory import NAMESPACE, PlanMemory
from tests.helpers import DEMO, plan_of, plan_reply, sales_plan, scripted, step, thread

TASK = "Analyze sales.csv and chart revenue by month"


def sales_for(plan: dict, file: str, column: str) -> dict:
    text = json.dumps(plan).replace("sales.csv", file).replace('"revenue"', json.dumps(column))
    return json.loads(text)


def first_run(use_models, ctx, workspace, store, planner=None):
    shutil.copy(DEMO / "sales.csv", workspace / "sales.csv")
    planner = planner or scripted(plan_reply(sales_plan()))
    use_models(planner=planner, executor=scripted())
    graph = build_graph(checkpointer=InMemorySaver(), store=store)
    config = thread()
    graph.invoke({"task": TASK}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded", out["final"]
    return graph, config


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_task_of_the_same_shape_reuses_the_plan_with_no_model_call(
    use_models, ctx, workspace, mode
):
    store = InMemoryStore()
    graph, first = first_run(use_models, ctx, workspace, store)
    [(key, template)] = PlanMemory(store).items()
    assert template["run"] == first["configurable"]["thread_id"]
    assert template["params"][:2] == ["sales.csv", "revenue"]
    raw = json.dumps(template)
    assert "{{p0}}" in raw and "sales.csv" not in json.dumps(template["plan"])

    (workspace / "q3.csv").write_text(
        (DEMO / "sales.csv").read_text().replace("revenue", "income", 1)
    )
    planner = scripted()  # no reply: a planner call would fail the test
    use_models(planner=planner, executor=scripted())
    config = thread()
    task = {"task": "analyze q3.csv and chart income by month"}
    if mode == "sync":
        asked = graph.invoke(task, config, context=ctx())
    else:
        asked = asyncio.run(graph.ainvoke(task, config, context=ctx()))
    request = asked["__interrupt__"][0].value
    assert request["type"] == "plan_approval" and request["origin"] == "memory"
    assert request["memory"]["run"] == first["configurable"]["thread_id"]
    assert request["memory"]["changes"] == ["sales.csv → q3.csv", "revenue → income"]
    assert "Adapted from the plan of run" in request["description"]
    assert planner.prompts == []
    assert "planner" not in (asked.get("usage") or graph.get_state(config).values["usage"])
    steps = request["plan"]["steps"]
    assert steps[0]["args"] == {"path": "q3.csv"}
    assert steps[2]["args"]["value_column"] == "income"
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded", out["final"]


@pytest.mark.parametrize("policy", ["first", "always"])
def test_a_remembered_plan_is_never_approved_because_an_earlier_one_was(
    use_models, ctx, workspace, policy
):
    """Approval "first" lets only a replanner's own revision run unasked: a plan from memory
    waits for a human like a planner's, although the plan it came from was approved."""
    store = InMemoryStore()
    graph, _ = first_run(use_models, ctx, workspace, store)
    use_models(planner=scripted(), executor=scripted())
    config = thread()
    run_ctx = ctx(approval=policy)
    asked = graph.invoke({"task": TASK.replace("revenue", "quantity")}, config, context=run_ctx)
    assert asked["__interrupt__"][0].value["origin"] == "memory"
    state = graph.get_state(config)
    assert state.next == ("approval",) and state.values.get("approved") is None
    assert state.values["proposed"]["by"] == "memory"


def test_a_similar_task_is_adapted_by_the_cheap_model_in_one_call(use_models, ctx, workspace):
    store = InMemoryStore()
    graph, _ = first_run(use_models, ctx, workspace, store)
    adapted = sales_for(sales_plan(), "sales.csv", "revenue")
    cheap = scripted(plan_reply(adapted))
    planner = scripted()
    use_models(planner=planner, executor=cheap)
    config = thread()
    asked = graph.invoke(
        {"task": "Please analyze the monthly revenue of sales.csv and chart it"},
        config,
        context=ctx(),
    )
    request = asked["__interrupt__"][0].value
    assert request["origin"] == "memory" and request["memory"]["how"] == "similar"
    assert len(cheap.prompts) == 1 and planner.prompts == []
    assert "approved and that ran well" in cheap.prompts[0]
    assert graph.get_state(config).values["usage"]["memory"]["calls"] == 1


def test_a_miss_or_an_invalid_adaptation_falls_back_to_the_planner(use_models, ctx, workspace):
    store = InMemoryStore()
    graph, _ = first_run(use_models, ctx, workspace, store)
    bad = plan_of(step(1, "no_such_tool", {}))
    cheap = scripted(plan_reply(bad))
    planner = scripted(plan_reply(plan_of(step(1, "list_files", {}))))
    use_models(planner=planner, executor=cheap)
    config = thread()
    asked = graph.invoke(
        {"task": "Please analyze the monthly revenue of sales.csv and chart it"},
        config,
        context=ctx(),
    )
    assert asked["__interrupt__"][0].value["origin"] == "planner"
    assert len(planner.prompts) == 1
    planner2 = scripted(plan_reply(plan_of(step(1, "list_files", {}))))
    use_models(planner=planner2, executor=scripted())
    other = graph.invoke({"task": "list my files"}, thread(), context=ctx())
    assert other["__interrupt__"][0].value["origin"] == "planner"  # nothing alike: a miss


def test_memory_off_neither_reads_nor_writes(use_models, ctx, workspace):
    store = InMemoryStore()
    shutil.copy(DEMO / "sales.csv", workspace / "sales.csv")
    use_models(planner=scripted(plan_reply(sales_plan())), executor=scripted())
    graph = build_graph(checkpointer=InMemorySaver(), store=store)
    config = thread()
    graph.invoke({"task": TASK}, config, context=ctx(plan_memory=False))
    graph.invoke(Command(resume={"action": "approve"}), config, context=ctx(plan_memory=False))
    assert PlanMemory(store).items() == []


def test_a_damaged_template_never_fails_a_run(use_models, ctx, workspace):
    store = InMemoryStore()
    store.put(NAMESPACE, "broken", {"pattern": "(", "plan": 7, "keywords": ["analyze"]})
    store.put(
        NAMESPACE,
        "wrong",
        {"pattern": "analyze (.+)", "params": ["x"], "plan": {"goal": 1}, "saved_at": "soon"},
    )
    planner = scripted(plan_reply(plan_of(step(1, "list_files", {}))))
    use_models(planner=planner, executor=scripted())
    graph = build_graph(checkpointer=InMemorySaver(), store=store)
    asked = graph.invoke({"task": "analyze this"}, thread(), context=ctx())
    assert asked["__interrupt__"][0].value["origin"] == "planner"


def test_no_secret_is_kept_in_memory(use_models, ctx, workspace, monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "sk-memory-SECRET-1234567890")
    store = InMemoryStore()
    plan = plan_of(
        step(1, "write_file", {"path": "a.txt", "content": "sk-memory-SECRET-1234567890"})
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), store=store)
    config = thread()
    graph.invoke({"task": "write sk-memory-SECRET-1234567890 to a.txt"}, config, context=ctx())
    graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert "sk-memory-SECRET" not in json.dumps(PlanMemory(store).items())


def test_templates_can_be_listed_read_and_deleted(use_models, ctx, workspace, tmp_path):
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "memory.sqlite")) as store:
        store.setup()
        first_run(use_models, ctx, workspace, store)
        memory = PlanMemory(store)
        [(key, template)] = memory.items()
        assert memory.get(key) == template
        assert memory.delete(key) is True and memory.items() == []
        assert memory.delete(key) is False


def test_the_cli_reuses_plans_and_lists_shows_and_deletes_them(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    (tmp_path / "planner.json").write_text(
        json.dumps([{"tool_calls": [{"name": "Plan", "args": sales_plan()}]}])
    )
    shutil.copy(DEMO / "sales.csv", tmp_path / "sales.csv")
    common = ["--db", "runs.sqlite"]
    first = CliRunner().invoke(
        app,
        ["run", TASK, "--data", "sales.csv", "--workspace", "ws", "--yes", *common,
         "--planner-model", f"scripted:{tmp_path / 'planner.json'}"],
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    listed = CliRunner().invoke(app, ["plans", *common, "--json"])
    [template] = json.loads(listed.stdout)
    assert template["task"] == TASK

    (tmp_path / "empty.json").write_text("[]")  # a planner call would fail
    again = CliRunner().invoke(
        app,
        ["run", TASK.replace("revenue", "quantity"), "--data", "sales.csv", "--workspace", "ws2",
         "--yes", *common, "--planner-model", f"scripted:{tmp_path / 'empty.json'}"],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "adapted from an approved plan of a similar task" in again.output
    assert "Changes: revenue → quantity." in again.output

    shown = CliRunner().invoke(app, ["plans", "show", template["key"], *common])
    newest = TASK.replace("revenue", "quantity")  # a run of the same shape replaced it
    assert json.loads(shown.stdout)["task"] == newest
    gone = CliRunner().invoke(app, ["plans", "delete", template["key"], *common])
    assert gone.exit_code == 0 and "deleted" in gone.output
    missing = CliRunner().invoke(app, ["plans", "delete", template["key"], *common])
    assert missing.exit_code == 2 and "no plan template" in missing.output


def test_the_cli_turns_memory_off(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    monkeypatch.delenv("PLANEXEC_PLAN_MEMORY", raising=False)
    (tmp_path / "planner.json").write_text(
        json.dumps([{"tool_calls": [{"name": "Plan", "args": sales_plan()}]}] * 2)
    )
    shutil.copy(DEMO / "sales.csv", tmp_path / "sales.csv")
    common = ["--db", "runs.sqlite", "--planner-model", f"scripted:{tmp_path / 'planner.json'}"]
    for ws in ("ws", "ws2"):
        done = CliRunner().invoke(
            app,
            ["run", TASK, "--data", "sales.csv", "--workspace", ws, "--yes", "--no-memory",
             *common],
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert "adapted from an approved plan" not in done.output  # the planner planned
    listed = CliRunner().invoke(app, ["plans", "--db", "runs.sqlite", "--json"])
    assert json.loads(listed.stdout) == []  # nor was any plan kept
    shown = CliRunner().invoke(app, ["run", "--help"])
    assert "--no-memory" in shown.output


# Issue 33: the similar path asked the cheap model with 8,692 tokens where planning fresh took
# 8,121. Memory adapts only when the adaptation prompt is smaller than the planner's would be:
# it shows the template's plan compactly with only the tools it uses, and when even that is
# not smaller, the planner plans fresh and the cheap model is never called.

SIMILAR = "Please analyze the monthly revenue of sales.csv and chart it"


def test_the_adaptation_prompt_is_smaller_than_planning_fresh(use_models, ctx, workspace):
    store = InMemoryStore()
    graph, _ = first_run(use_models, ctx, workspace, store)
    cheap = scripted(plan_reply(sales_plan()))
    use_models(planner=scripted(), executor=cheap)
    asked = graph.invoke({"task": SIMILAR}, thread(), context=ctx())
    assert asked["__interrupt__"][0].value["memory"]["how"] == "similar"
    [adapting] = cheap.prompts

    planner = scripted(plan_reply(sales_plan()))
    use_models(planner=planner, executor=scripted())
    fresh = graph.invoke({"task": SIMILAR}, thread(), context=ctx(plan_memory=False))
    assert fresh["__interrupt__"][0].value["origin"] == "planner"
    [planning] = planner.prompts
    assert len(adapting) < 0.5 * len(planning), (len(adapting), len(planning))
    assert '"name": "write_file"' not in adapting  # a tool the template does not use
    assert '"name": "write_file"' in planning
    template = adapting.split("that ran well", 1)[1].split("Adapt it", 1)[0]
    assert '"load_csv": {' in template  # the compact format: no ids, derived fields left out
    assert '"description"' not in template and '"depends_on"' not in template


def test_when_adapting_would_not_cost_less_the_planner_plans_fresh(use_models, ctx, workspace):
    """A similar template whose plan is larger than the planner's whole prompt: no cheap
    call is made, the planner plans."""
    store = InMemoryStore()
    long_text = "x" * 60_000
    big = plan_of(
        step(1, "list_files", {}), step(2, "write_file", {"path": "n.md", "content": long_text})
    )
    PlanMemory(store).remember("Please analyze the monthly revenue of old.csv", big, "r1")
    cheap = scripted(plan_reply(sales_plan()))  # would be used if it were asked
    planner = scripted(plan_reply(plan_of(step(1, "list_files", {}))))
    use_models(planner=planner, executor=cheap)
    graph = build_graph(checkpointer=InMemorySaver(), store=store)
    config = thread()
    asked = graph.invoke({"task": SIMILAR}, config, context=ctx())
    assert asked["__interrupt__"][0].value["origin"] == "planner"
    assert cheap.prompts == [] and len(planner.prompts) == 1
    assert "memory" not in graph.get_state(config).values["usage"]
