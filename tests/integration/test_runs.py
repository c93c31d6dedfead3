"""The runs API (planexec.Runs): sync and async, a task or a plan, resume with an answer."""

from __future__ import annotations

import asyncio
import json

import pytest

from planexec import Context, RunError, Runs, default_registry, new_run
from tests.helpers import EXAMPLES, echo, plan_of, sales_plan, step


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_OUTPUTS_DIR", str(tmp_path / "outputs"))
    return tmp_path


def planned(env) -> Context:
    path = env / "planner.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": sales_plan()}]}]))
    return Context(planner_model=f"scripted:{path}")


def test_the_readme_example_stops_at_approval_then_resumes(env):
    with Runs.open(str(env / "runs.sqlite")) as runs:
        request = new_run(
            "Analyze sales.csv", workspace="ws", data=[EXAMPLES / "sales.csv"], context=planned(env)
        )
        result = runs.start(request)
        assert result.status == "unfinished" and result.request["plan"]["steps"]
        answer = {"action": "approve", "digest": result.request["digest"]}
        result = runs.resume(result.thread_id, answer)
        assert result.status == "succeeded" and result.request is None
        assert (env / "ws" / "output" / "report.md").exists()
        thread = runs.get(result.thread_id)
        assert thread is not None and thread.finished and thread.workspace == str(env / "ws")
        assert [row["thread_id"] for row in runs.threads()] == [result.thread_id]


def test_async_run_of_a_plan_with_a_decide_callback_and_events(env):
    plan = plan_of(step(1, "echo", {"text": "hi"}))
    events, asked = [], []

    def decide(request):  # a plan given by hand is named by its digest: a version is refused
        asked.append(request.get("error"))
        name = "digest" if asked[-1] else "version"
        return {"action": "approve", name: request[name]}

    async def go():
        async with Runs.aopen(str(env / "runs.sqlite"), tools=echo_tools()) as runs:
            request = new_run(plan=plan, workspace="ws", tools=echo_tools())
            result = await runs.astart(request, on_event=events.append, decide=decide)
            again = await runs.aresume(result.thread_id)  # finished: nothing more runs
            return result, again, await runs.athreads()

    result, again, listed = asyncio.run(go())
    assert result.status == "succeeded" and asked[0] is None and "digest" in asked[1]
    assert result.values["steps"]["1"]["output"] == "hi" and again.status == "succeeded"
    assert [e["event"] for e in events] == ["step_started", "step_finished"]
    assert listed[0]["status"] == "succeeded" and listed[0]["task"] == "test goal"


def test_mistakes_are_one_line_run_errors(env):
    with Runs.open(str(env / "runs.sqlite")) as runs:
        with pytest.raises(RunError, match="no run with thread id nope in "):
            runs.resume("nope")
        assert runs.get("nope") is None
        request = new_run(plan=plan_of(step(1, "echo", {"text": "x"})), tools=echo_tools())
        runs.seed(request)
        with pytest.raises(RunError, match="already exists"):
            runs.seed(request)
    with pytest.raises(RunError, match="give a task, or a plan"):
        new_run()
    with pytest.raises(RunError, match="is inside the workspace"):
        new_run("x", workspace=env / "ws", db=str(env / "ws" / "runs.sqlite"))
    with pytest.raises(RunError, match="plan is invalid: "):
        new_run(plan={"goal": "x", "steps": []})


def test_a_database_that_cannot_open_is_named_without_its_password(env):
    url = "postgresql://user:hunter2@127.0.0.1:1/db"
    with pytest.raises(RunError) as failed, Runs.open(url):
        pass
    assert "cannot open the run database postgresql://user:" in str(failed.value)
    assert "hunter2" not in str(failed.value)


def echo_tools():
    registry = default_registry()
    registry.register(echo)
    return registry
