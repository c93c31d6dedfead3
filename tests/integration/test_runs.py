"""The runs API (planexec.Runs): sync and async, a task or a plan, resume with an answer."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from planexec import Context, RunError, Runs, default_registry, new_run
from tests.helpers import DEMO, echo, plan_of, sales_plan, step


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
            "Analyze sales.csv", workspace="ws", data=[DEMO / "sales.csv"], context=planned(env)
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
    assert [e["event"] for e in events if e["event"].startswith("step_")] == [
        "step_started",
        "step_finished",
    ]
    assert {"event": "node_started", "node": "executor"} in events  # who is at work, for a UI
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


def test_a_decide_that_keeps_being_refused_is_stopped_and_the_thread_waits(env):
    asked = []

    def garbage(request):  # an answer naming a plan that is not the one waiting
        asked.append(request.get("error"))
        return {"action": "approve", "digest": "garbage"}

    plan = plan_of(step(1, "echo", {"text": "hi"}))
    with Runs.open(str(env / "runs.sqlite"), tools=echo_tools()) as runs:
        request = new_run(plan=plan, tools=echo_tools(), thread_id="t-garbage")
        with pytest.raises(RunError) as stopped:
            runs.start(request, decide=garbage)
        message = str(stopped.value)
        assert len(asked) == 3 and "\n" not in message
        assert "digest garbage" in message and "planexec resume t-garbage" in message
        thread = runs.get("t-garbage")
        assert thread is not None and thread.next  # it still waits at the approval
        digest = runs.resume("t-garbage").request["digest"]
        assert runs.resume("t-garbage", {"action": "approve", "digest": digest}).status == (
            "succeeded"
        )


def test_an_async_decide_that_keeps_being_refused_is_stopped(env):
    async def go():
        async with Runs.aopen(str(env / "runs.sqlite"), tools=echo_tools()) as runs:
            request = new_run(plan=plan_of(step(1, "echo", {"text": "hi"})), tools=echo_tools())
            await runs.astart(request, decide=lambda r: {"action": "approve", "version": 99})

    with pytest.raises(RunError, match="waits at approval"):
        asyncio.run(go())


def test_a_state_edit_keeps_the_runs_folder_and_context(env):
    plan = plan_of(step(1, "write_file", {"path": "out.txt", "content": "hi"}))
    context = Context(approval="always", max_steps=3)
    with Runs.open(str(env / "runs.sqlite")) as runs:
        result = runs.start(new_run(plan=plan, workspace="ws", context=context))
        edited = {**result.request["plan"], "goal": "edited goal"}
        config = {"configurable": {"thread_id": result.thread_id}}
        runs.graph().update_state(config, {"plan": edited}, as_node="planner")  # no metadata
        thread = runs.get(result.thread_id)
        assert thread is not None and thread.workspace == str(env / "ws")
        assert thread.saved_context["approval"] == "always"
        digest = runs.resume(result.thread_id).request["digest"]
        done = runs.resume(result.thread_id, {"action": "approve", "digest": digest})
        assert done.status == "succeeded" and done.workspace == str(env / "ws")
        assert (env / "ws" / "out.txt").read_text() == "hi"


@pytest.mark.parametrize(
    "db",
    [
        "POSTGRESQL://alice:Hunter2Secret@127.0.0.1:1/db",
        "postgresql+psycopg://alice:Hunter2Secret@127.0.0.1:1/db",
        "postgresql://alice:Hunter2/Secret@127.0.0.1:1/db",
        "postgresql://alice:Hunter2?Secret@127.0.0.1:1/db",
        "postgresql://alice:Hunter2#Secret@127.0.0.1:1/db",
        "host=127.0.0.1 port=1 user=alice password=Hunter2Secret dbname=db",
    ],
)
def test_postgres_urls_of_any_spelling_are_not_sqlite_files_and_hide_the_password(env, db):
    with pytest.raises(RunError) as failed, Runs.open(db):
        pass
    assert "cannot open the run database" in str(failed.value)
    assert "Hunter2" not in str(failed.value) and "Secret" not in str(failed.value)
    assert list(env.iterdir()) == []  # no SQLite file named after the URL


def echo_tools():
    registry = default_registry()
    registry.register(echo)
    return registry


def test_a_state_edit_keeps_the_runs_settings_for_async_callers_too(env):
    plan = plan_of(step(1, "write_file", {"path": "out.txt", "content": "hi"}))

    async def go():
        async with Runs.aopen(str(env / "runs.sqlite")) as runs:
            context = Context(approval="always")
            result = await runs.astart(new_run(plan=plan, workspace="ws", context=context))
            edited = {**result.request["plan"], "goal": "edited goal"}
            config = {"configurable": {"thread_id": result.thread_id}}
            await runs.graph().aupdate_state(config, {"plan": edited}, as_node="planner")
            return await runs.aget(result.thread_id)

    thread = asyncio.run(go())
    assert thread is not None and thread.workspace == str(env / "ws")
    assert thread.saved_context["approval"] == "always"


# speculation (issue 37): the reviewer reads while the plan's read-only steps run
SPECULATED_CALLS: list[tuple[str, str, float]] = []


def _look(x: str, seconds: float = 0.3) -> str:
    """Look at x (read-only): take ``seconds``."""
    SPECULATED_CALLS.append(("look", x, time.monotonic()))
    time.sleep(seconds)
    return f"saw {x}"


def _send(x: str) -> str:
    """Send x (a side effect)."""
    SPECULATED_CALLS.append(("send", x, time.monotonic()))
    return f"sent {x}"


_look.metadata = {"side_effects": False, "open_world": False}  # type: ignore[attr-defined]
_send.metadata = {"side_effects": True}  # type: ignore[attr-defined]


def speculating_tools():
    registry = default_registry()
    registry.register(_look)
    registry.register(_send)
    return registry


SLOW_READS = plan_of(  # read-only: 1 (0.3 s), 2 after 1 (0.6 s), 3 (1.5 s), 5 after 2 (0.3 s)
    step(1, "_look", {"x": "a", "seconds": 0.3}),
    step(2, "_look", {"x": "b", "seconds": 0.6}, [1]),
    step(3, "_look", {"x": "c", "seconds": 1.5}),
    step(4, "_send", {"x": "$2"}, [2, 3]),  # sends: after the approval only
    step(5, "_look", {"x": "d", "seconds": 0.3}, [2]),
)


def run_while_reviewing(env, answer: str, reading: float):
    """Run SLOW_READS with speculation; the reviewer reads for ``reading`` s, then answers."""
    SPECULATED_CALLS.clear()
    events, asked = [], {}

    def decide(request):
        asked["at"], asked["seen"] = time.monotonic(), [e["event"] for e in events]
        asked["speculation"] = request.get("speculation")
        time.sleep(reading)
        asked["answered"] = time.monotonic()
        reason = {"reason": "not now"} if answer == "cancel" else {}
        return {"action": answer, "digest": request["digest"], **reason}

    async def go():
        tools = speculating_tools()
        async with Runs.aopen(str(env / "runs.sqlite"), tools=tools, speculate="tools") as runs:
            context = Context(speculate=True, max_replans=0)
            request = new_run(plan=SLOW_READS, workspace="ws", tools=tools, context=context)
            result = await runs.astart(request, on_event=events.append, decide=decide)
            return result, time.monotonic()

    result, ended = asyncio.run(go())
    return result, events, asked, ended


def test_an_async_run_asks_at_once_while_read_only_steps_run_and_keeps_them(env):
    result, events, asked, ended = run_while_reviewing(env, "approve", reading=0.5)
    kinds = [e["event"] for e in events]
    # asked as soon as the request came: no speculative step had finished yet
    assert "speculation_started" in kinds and "speculative_step_finished" not in asked["seen"]
    assert asked["speculation"]["steps"] == [1, 3, 2, 5]
    assert result.status == "succeeded"
    steps = result.values["steps"]
    assert all(steps[s].get("speculative") for s in ("1", "2", "3"))  # taken over, not rerun
    assert "speculative" not in steps["5"]  # not started once answered: run as approved
    assert "speculative" not in steps["4"] and steps["4"]["output"] == "sent saw b"
    looked = [c[1] for c in SPECULATED_CALLS if c[0] == "look"]
    assert sorted(looked) == ["a", "b", "c", "d"]  # no tool called twice
    sent = next(c[2] for c in SPECULATED_CALLS if c[0] == "send")
    assert ended - sent < 1.0  # after the last read-only step: only the side-effecting tail


def test_a_cancel_given_while_read_only_steps_run_stops_them_at_once(env):
    result, events, asked, ended = run_while_reviewing(env, "cancel", reading=0.5)
    assert result.status == "cancelled"
    slow_read = next(c[2] for c in SPECULATED_CALLS if c[:2] == ("look", "c"))
    assert ended - slow_read < 1.5  # the run did not wait for the 1.5 s read under way
    assert not [c for c in SPECULATED_CALLS if c[0] == "send"]
    assert sorted(c[1] for c in SPECULATED_CALLS) == ["a", "b", "c"]  # none started again


def test_a_cancel_given_while_read_only_steps_run_keeps_none_of_their_results(env):
    result, _, _, _ = run_while_reviewing(env, "cancel", reading=0.5)
    assert result.status == "cancelled" and not result.values.get("speculated")


def test_a_sync_run_asks_once_the_read_only_steps_ended_and_keeps_them(env):
    # LangGraph's sync stream gives the interrupt only when the superstep (the speculation) ends
    SPECULATED_CALLS.clear()
    seen, shown = [], []
    tools = speculating_tools()
    with Runs.open(str(env / "runs.sqlite"), tools=tools, speculate="tools") as runs:
        context = Context(speculate=True, max_replans=0)
        request = new_run(plan=SLOW_READS, workspace="ws", tools=tools, context=context)
        result = runs.start(
            request,
            on_event=lambda e: seen.append(e["event"]),
            decide=lambda r: seen.append("asked") or shown.append(r) or {"action": "approve"},
        )
    assert result.status == "succeeded"
    assert seen.index("asked") > seen.index("speculation_ended")
    # asked once they ended, the reviewer sees their results, not approved
    results = shown[0]["speculation"]["results"]
    assert sorted(results) == ["1", "2", "3", "5"]
    assert all(r["status"] == "succeeded" and r["approved"] is False for r in results.values())
    assert all(result.values["steps"][s].get("speculative") for s in ("1", "2", "3", "5"))
    assert sorted(c[1] for c in SPECULATED_CALLS if c[0] == "look") == ["a", "b", "c", "d"]
