"""One meaning of "workspace": the one folder a run's tools may use, given as a PATH by whoever
runs planexec (build_graph, Runs.new_run, the CLI); a run names a shared folder with
``shared_folder`` (issue 33)."""

from __future__ import annotations

import json
import shutil

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph, default_registry
from planexec.tools.sandbox import Sandbox, SandboxError
from tests.helpers import DEMO, plan_of, plan_reply, scripted, step

READ_SALES = plan_of(step(1, "read_file", {"path": "sales.csv", "max_chars": 200}))


def test_the_readme_program_reads_the_folder_it_names(use_models, tmp_path, monkeypatch):
    """``build_graph(workspace="my-data")`` with ./my-data/sales.csv: the plan reads it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-data").mkdir()
    shutil.copy(DEMO / "sales.csv", tmp_path / "my-data" / "sales.csv")
    use_models(planner=scripted(plan_reply(READ_SALES)))
    graph = build_graph(checkpointer=InMemorySaver(), workspace="my-data")
    config = {"configurable": {"thread_id": "sales-1"}}
    ctx = Context(planner_model="test:planner", executor_model="test:executor")

    out = graph.invoke({"task": "Analyze sales.csv"}, config, context=ctx)
    request = out["__interrupt__"][0].value
    answer = {"action": "approve", "digest": request["digest"]}
    out = graph.invoke(Command(resume=answer), config, context=ctx)

    assert out["final"]["status"] == "succeeded", out["steps"]
    assert "date" in str(out["steps"]["1"]["output"]).lower()
    assert not (tmp_path / "planexec-workspaces" / "threads").exists()  # no other folder


def test_a_graphs_workspace_holds_what_its_tools_write(use_models, tmp_path):
    plan = plan_of(step(1, "write_file", {"path": "note.txt", "content": "kept"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(InMemorySaver(), tools=default_registry(), workspace=tmp_path / "mine")
    config = {"configurable": {"thread_id": "t1"}}
    ctx = Context(planner_model="test:planner", approval="always")
    graph.invoke({"task": "write a note"}, config, context=ctx)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
    assert out["final"]["status"] == "succeeded"
    assert (tmp_path / "mine" / "note.txt").read_text() == "kept"


def test_a_workspace_is_exclusive_with_a_root_or_a_sandbox(tmp_path):
    with pytest.raises(SandboxError, match="workspace"):
        build_graph(workspace=tmp_path / "a", workspace_root=tmp_path / "b")
    with pytest.raises(SandboxError, match="workspace"):
        build_graph(workspace=tmp_path / "a", sandbox=Sandbox.at(tmp_path / "b"))


def test_a_shared_folder_is_a_name_below_the_operators_root(use_models, tmp_path):
    plan = plan_of(step(1, "write_file", {"path": "note.txt", "content": "shared"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(
        InMemorySaver(), tools=default_registry(), workspace_root=tmp_path, approval="never"
    )
    config = {"configurable": {"thread_id": "t1"}}
    ctx = Context(planner_model="test:planner", shared_folder="team/sales")
    out = graph.invoke({"task": "write a note"}, config, context=ctx)
    assert out["final"]["status"] == "succeeded"
    assert (tmp_path / "shared" / "team" / "sales" / "note.txt").read_text() == "shared"


# ---- one default place: ROOT/threads/THREAD_ID, wherever a run starts -----------------------


def write_note_plan(path):
    path.write_text(json.dumps(plan_of(step(1, "write_file", {"path": "n.txt", "content": "x"}))))
    return path


def test_the_cli_without_workspace_works_where_build_graph_would(
    tmp_path, monkeypatch, workspace_root
):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    plan = write_note_plan(tmp_path / "plan.json")
    args = ["run", "--plan", str(plan), "--yes", "--thread-id", "t-1", "--db", "runs.db"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    folder = Sandbox.at().workspace_path(None, "t-1")
    assert folder == workspace_root / "threads" / "t-1"
    assert (folder / "n.txt").read_text() == "x"
    assert not (tmp_path / "planexec-runs").exists()


def test_the_demo_without_workspace_works_below_the_workspace_root(
    tmp_path, monkeypatch, workspace_root
):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo", "--yes", "--db", "runs.db"])
    assert result.exit_code == 0, result.output
    [folder] = (workspace_root / "threads").iterdir()
    assert (folder / "output" / "report.md").is_file()
    assert not (tmp_path / "planexec-demo").exists()


def test_runs_without_workspace_use_the_threads_own_folder(tmp_path, workspace_root):
    from planexec.runs import Runs, new_run

    plan = json.loads(write_note_plan(tmp_path / "plan.json").read_text())
    with Runs.open(str(tmp_path / "runs.db")) as runs:
        request = new_run(plan=plan, thread_id="t-2", data=[DEMO / "sales.csv"])
        result = runs.start(request, decide=lambda _: {"action": "approve"})
    folder = workspace_root / "threads" / "t-2"
    assert result.status == "succeeded" and result.workspace == str(folder)
    assert (folder / "n.txt").is_file() and (folder / "sales.csv").is_file()


@pytest.mark.server
def test_the_served_graph_works_in_the_folder_its_operator_names(tmp_path):
    """``PLANEXEC_WORKSPACE`` gives every run of the served graph one folder (a path)."""
    import asyncio

    from langgraph_sdk import get_client

    from tests.servers import langgraph_dev

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(DEMO / "sales.csv", data / "sales.csv")
    script = tmp_path / "planner.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": READ_SALES}]}]))
    env = {"PLANEXEC_WORKSPACE": str(data), "PLANEXEC_APPROVAL": "never"}

    async def scenario(url: str) -> dict:
        client = get_client(url=url)
        tid = (await client.threads.create())["thread_id"]
        context = {"planner_model": f"scripted:{script}"}
        return await client.runs.wait(tid, "planexec", input={"task": "t"}, context=context)

    (tmp_path / "server").mkdir()
    with langgraph_dev(tmp_path / "server" / "langgraph-dev.log", env) as url:
        result = asyncio.run(scenario(url))
    assert result["final"]["status"] == "succeeded", result


def test_a_run_saved_with_the_old_workspace_field_keeps_its_shared_folder():
    from planexec.runs.request import saved_context

    assert saved_context({"workspace": "sales", "max_steps": 3}).shared_folder == "sales"
    assert saved_context({"workspace": "/old/cli/folder"}).shared_folder is None
