"""Kill a run with SIGKILL mid-execution, resume it elsewhere: nothing finished runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import ROOT, plan_of, step

PLAN = plan_of(
    step(1, "append_line", {"label": "one", "seconds": 0.05}),
    step(2, "append_line", {"label": "two", "seconds": 0.05}, [1]),
    step(3, "append_line", {"label": "three", "seconds": 1.5}),
    step(4, "append_line", {"label": "four", "seconds": 1.5}, [2]),
    step(5, "append_line", {"label": "five after $3.label and $4.label", "seconds": 0.05}, [3, 4]),
)


def worker(action: str, db: str, ws: Path, threads: str, script: Path, mode: str):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.crash_worker",
            action,
            db,
            str(ws),
            threads,
            str(script),
            mode,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(ws: Path) -> list[str]:
    log = ws / "log.txt"
    return log.read_text().splitlines() if log.exists() else []


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def result(ws: Path, thread_id: str) -> dict:
    return json.loads((ws / f"result-{thread_id}.json").read_text())


def streamed_script(path: Path, plan: dict) -> None:
    """The planner's script: the plan, streamed in small pieces as a real model writes it."""
    reply = {"tool_calls": [{"name": "Plan", "args": plan}]}
    path.write_text(json.dumps({"replies": [reply], "stream_chunk_chars": 16}))


def kill_once_logged(proc: subprocess.Popen, ws: Path, logged: list[str]) -> None:
    """SIGKILL the run 0.3 s after its log reads ``logged`` (their results saved by then)."""
    deadline = time.time() + 60
    while lines(ws) != logged:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, f"{logged} were never logged"
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lines(ws) == logged


def kill_during_steps_3_and_4(proc: subprocess.Popen, ws: Path) -> None:
    kill_once_logged(proc, ws, ["one", "two"])  # steps 3 and 4 are running then


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "planner.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": PLAN}]}]))
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return lambda name: str(tmp_path / f"{name}.db")
    url = request.getfixturevalue("postgres_url")
    return lambda name: url


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_killed_run_resumes_without_rerunning_finished_steps(tmp_path, script, db, mode):
    ws, thread_id = tmp_path / "ws", str(uuid.uuid4())
    kill_during_steps_3_and_4(worker("start", db("runs"), ws, thread_id, script, mode), ws)

    # the uninterrupted reference run (its own workspace, database or thread) runs alongside
    # the resume: started after the kill, so the killed run set up the tables alone
    reference_ws, reference_tid = tmp_path / "reference", str(uuid.uuid4())
    reference = worker("start", db("reference"), reference_ws, reference_tid, script, mode)
    finish(worker("resume", db("runs"), ws, thread_id, script, mode))
    finish(reference)
    assert sorted(lines(ws)) == sorted(["one", "two", "three", "four", "five after three and four"])
    assert result(ws, thread_id) == result(reference_ws, reference_tid)
    assert result(ws, thread_id)["final"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_killed_while_its_plan_streamed_resumes_without_rerunning_steps(tmp_path, db, mode):
    # approval never: the steps start while the planner writes the plan, in the planner node
    script = tmp_path / "streamed.json"
    streamed_script(script, PLAN)
    ws, thread_id = tmp_path / "ws", str(uuid.uuid4())
    proc = worker("run", db("runs"), ws, thread_id, script, f"{mode}-never")
    kill_during_steps_3_and_4(proc, ws)

    finish(worker("resume", db("runs"), ws, thread_id, script, f"{mode}-never"))
    assert sorted(lines(ws)) == sorted(["one", "two", "three", "four", "five after three and four"])
    assert result(ws, thread_id)["final"]["status"] == "succeeded"


def test_a_run_killed_while_its_plan_streamed_and_resumed_under_a_stricter_policy(tmp_path):
    # started under never, resumed under first: the steps that had finished are found again
    # and recorded (not run twice), nothing else starts before the human approves, and the
    # approval says what already ran
    script = tmp_path / "streamed.json"
    streamed_script(script, PLAN)
    db, ws, thread_id = str(tmp_path / "runs.db"), tmp_path / "ws", str(uuid.uuid4())
    kill_during_steps_3_and_4(worker("run", db, ws, thread_id, script, "sync-never"), ws)

    finish(worker("resume", db, ws, thread_id, script, "sync"))  # policy first: it asks
    waiting = result(ws, thread_id)
    assert waiting["final"] is None
    assert (
        "Already ran, before this approval: step 1 (succeeded), 2 (succeeded)."
        in (waiting["question"])
    )
    assert lines(ws) == ["one", "two"]  # nothing else ran before the approval
    assert {k: s["status"] for k, s in waiting["steps"].items()} == {
        "1": "succeeded",
        "2": "succeeded",
        "3": "pending",
        "4": "pending",
        "5": "pending",
    }
    finish(worker("approve", db, ws, thread_id, script, "sync"))
    assert result(ws, thread_id)["final"]["status"] == "succeeded"
    assert sorted(lines(ws)) == sorted(["one", "two", "three", "four", "five after three and four"])


def test_a_stricter_resume_holds_the_place_of_a_step_that_had_not_finished(tmp_path):
    # step 1 is still running when the process dies, step 2 (called after it) has finished:
    # the resume replays step 2 in its own place, holding step 1's, so step 2 is not run again
    plan = plan_of(
        step(1, "append_line", {"label": "slow", "seconds": 3.0}),
        step(2, "append_line", {"label": "quick", "seconds": 0.05}),
        step(3, "append_line", {"label": "last", "seconds": 0.05}, [1, 2]),
    )
    script = tmp_path / "streamed.json"
    streamed_script(script, plan)
    db, ws, thread_id = str(tmp_path / "runs.db"), tmp_path / "ws", str(uuid.uuid4())
    proc = worker("run", db, ws, thread_id, script, "sync-never")
    kill_once_logged(proc, ws, ["quick"])  # step 2's result saved, step 1 still running

    finish(worker("resume", db, ws, thread_id, script, "sync"))  # policy first: it asks
    waiting = result(ws, thread_id)
    assert lines(ws) == ["quick"]
    assert "Already ran, before this approval: step 2 (succeeded)." in waiting["question"]
    finish(worker("approve", db, ws, thread_id, script, "sync"))
    assert lines(ws) == ["quick", "slow", "last"]
    assert result(ws, thread_id)["final"]["status"] == "succeeded"


def test_a_plan_written_differently_after_the_kill_never_takes_another_steps_result(tmp_path):
    script = tmp_path / "streamed.json"
    streamed_script(script, PLAN)
    db, ws, thread_id = str(tmp_path / "runs.db"), tmp_path / "ws", str(uuid.uuid4())
    kill_during_steps_3_and_4(worker("run", db, ws, thread_id, script, "async-never"), ws)

    changed = json.loads(json.dumps(PLAN))  # the model writes step 2 differently this time
    changed["steps"][1]["args"]["label"] = "TWO"
    streamed_script(script, changed)
    finish(worker("resume", db, ws, thread_id, script, "async-never"))
    out = result(ws, thread_id)
    assert "TWO" not in lines(ws)  # step 2's call was answered from the checkpoint, not run
    assert out["steps"]["2"]["status"] == "failed"  # and that answer was not taken as its own
    assert "another step 2 ran in its place" in out["steps"]["2"]["error"]
    assert '"label": "two"' in out["steps"]["2"]["error"]  # what ran there is told
    assert out["steps"]["1"] == {"status": "succeeded", "output": {"label": "one"}}
    assert out["final"]["status"] != "succeeded"


def test_worker_processes_sharing_postgres_resume_any_thread(tmp_path, script, postgres_url):
    ids = [str(uuid.uuid4()) for _ in range(4)]
    workspaces = {tid: tmp_path / tid for tid in ids}
    # one process per thread plans it and stops at its approval: the first alone (it may
    # create the tables), then the other three at once
    finish(worker("plan", postgres_url, workspaces[ids[0]], ids[0], script, "async"))
    planners = [worker("plan", postgres_url, workspaces[t], t, script, "async") for t in ids[1:]]
    for proc in planners:
        finish(proc)
    # two other processes, at the same time, each approve and run threads the first one made
    procs = []
    for group in (ids[0::2], ids[1::2]):
        for tid in group:
            procs.append(worker("approve", postgres_url, workspaces[tid], tid, script, "async"))
    for proc in procs:
        finish(proc)
    for tid in ids:
        assert result(workspaces[tid], tid)["final"]["status"] == "succeeded"
        assert len(lines(workspaces[tid])) == 5


# the replanner's revision under approval never: its steps start while it streams (in the
# replanner node); step 1 is kept, the revision's ids start at 2
FAILING = plan_of(
    step(1, "append_line", {"label": "zero", "seconds": 0.05}),
    step(2, "broken", {"reason": "disk full"}, [1]),
)
REVISION = plan_of(
    step(2, "append_line", {"label": "one after $1.label", "seconds": 0.05}, [1]),
    step(3, "append_line", {"label": "two", "seconds": 0.05}, [2]),
    step(4, "append_line", {"label": "three", "seconds": 1.5}),
    step(5, "append_line", {"label": "four", "seconds": 1.5}, [3]),
    step(6, "append_line", {"label": "five after $4.label and $5.label", "seconds": 0.05}, [4, 5]),
)
REVISED = ["zero", "broken", "one after zero", "two", "three", "four", "five after three and four"]


def revising_script(path: Path) -> None:
    """The planner's and replanner's script: a plan with a failing step, then the revision."""
    replies = [
        {"tool_calls": [{"name": "Plan", "args": REVISION}], "match": "did not fully succeed"},
        {"tool_calls": [{"name": "Plan", "args": FAILING}], "match": "crash test"},
    ]
    path.write_text(json.dumps({"replies": replies, "stream_chunk_chars": 16}))


def waiting_node(db: str, thread_id: str) -> tuple[str, ...]:
    """Return the nodes the killed thread would run next (from its last checkpoint)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from planexec import build_graph

    with SqliteSaver.from_conn_string(db) as saver:
        graph = build_graph(checkpointer=saver)
        return graph.get_state({"configurable": {"thread_id": thread_id}}).next


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_killed_while_its_revision_streamed_resumes_without_rerunning_steps(
    tmp_path, db, mode
):
    script = tmp_path / "revising.json"
    revising_script(script)
    ws, thread_id = tmp_path / "ws", str(uuid.uuid4())
    proc = worker("run", db("runs"), ws, thread_id, script, f"{mode}-never")
    kill_once_logged(proc, ws, ["zero", "broken", "one after zero", "two"])
    if not db("runs").startswith("postgresql://"):
        assert waiting_node(db("runs"), thread_id) == ("replanner",)  # killed while revising

    finish(worker("resume", db("runs"), ws, thread_id, script, f"{mode}-never"))
    assert sorted(lines(ws)) == sorted(REVISED)  # each once
    out = result(ws, thread_id)
    assert out["final"]["status"] == "succeeded"
    assert {k: s["status"] for k, s in out["steps"].items()} == {
        str(i): "succeeded" for i in range(1, 7)
    }
    assert out["steps"]["6"]["output"] == {"label": "five after three and four"}


def test_a_run_killed_while_its_revision_streamed_and_resumed_under_a_stricter_policy(tmp_path):
    # started under never, resumed under first: the revision's finished steps are found again
    # and recorded (not run twice); the revision adds no side-effecting tool, so under first
    # it runs unasked once whole, and the rest runs then
    script = tmp_path / "revising.json"
    revising_script(script)
    db, ws, thread_id = str(tmp_path / "runs.db"), tmp_path / "ws", str(uuid.uuid4())
    proc = worker("run", db, ws, thread_id, script, "sync-never")
    kill_once_logged(proc, ws, ["zero", "broken", "one after zero", "two"])

    finish(worker("resume", db, ws, thread_id, script, "sync"))  # policy first
    assert sorted(lines(ws)) == sorted(REVISED)  # each once
    assert result(ws, thread_id)["final"]["status"] == "succeeded"
