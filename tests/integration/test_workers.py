"""Three worker processes sharing one PostgreSQL through the runs API, as a deployment runs.

Each worker (tests/integration/runs_worker.py) is its own process with its own connections.
Any of them resumes a thread another one started; when all three resume one thread at once,
one runs it and the other two are refused at once, and each step runs once; when the worker
running a thread dies, another one finishes it. Steps are gates the test opens, so every
"while it runs" below is an event, never a guess about timing.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from planexec.tools.sandbox import Sandbox
from tests.helpers import ROOT
from tests.integration.runs_worker import LABELS, PLAN

pytestmark = pytest.mark.server
DEADLINE = 90.0  # generous: only a hang reaches it


class Worker:
    """A worker process; ``send`` a command, read its ``reply``."""

    def __init__(self, url: str, errors: Path) -> None:
        self.errors = errors  # a file, not a pipe: a full pipe would block the worker
        caller = os.environ.get("PYTHONPATH", "")
        paths = [str(ROOT / "src"), str(ROOT), *([caller] if caller else [])]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.runs_worker", url],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors.open("w"),
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, op: str, thread_id: str, **more: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "thread_id": thread_id, **more}) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                return dict(json.loads(self.lines.get(timeout=0.05)))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"worker exited: {self.errors.read_text()}") from None
        raise AssertionError(f"worker {self.proc.pid} never answered")

    def has_reply(self) -> bool:
        return not self.lines.empty()

    def stop(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()  # the worker ends when its input does
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def fresh_db(postgres_url: str) -> str:
    """A new, empty database on the session's PostgreSQL: the workers create its tables."""
    name = f"workers_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # a generated name: letters, digits, _
    return postgres_url.rpartition("/")[0] + "/" + name


@pytest.fixture
def workers(fresh_db: str, workspace_root: Path, tmp_path: Path) -> Iterator[list[Worker]]:
    """Three workers started at once on a fresh database (and this test's workspace root)."""
    started = [Worker(fresh_db, tmp_path / f"worker-{i}.err") for i in range(3)]
    try:
        for worker in started:
            assert "ready" in worker.reply()
        yield started
    finally:
        for worker in started:
            worker.stop()


@pytest.fixture
def script(tmp_path: Path) -> str:
    """The planner's script: the gate plan, for any prompt naming the task."""
    path = tmp_path / "planner.json"
    reply = {"match": "gate test", "tool_calls": [{"name": "Plan", "args": PLAN}]}
    path.write_text(json.dumps([reply]))
    return str(path)


def folder(workspace_root: Path, name: str) -> Path:
    """The shared workspace ``name`` below the workspace root."""
    return Sandbox.at(workspace_root).workspace_path(name, None)


def log(ws: Path) -> list[str]:
    path = ws / "log.txt"
    return path.read_text().splitlines() if path.exists() else []


def counts(ws: Path, what: str) -> dict[str, int]:
    """How many times each gate step logged ``what`` (start or end)."""
    lines = log(ws)
    return {label: lines.count(f"{what} {label}") for label in LABELS}


def open_gates(ws: Path) -> None:
    for label in LABELS:
        (ws / f"open-{label}").touch()


def wait_until(check: Callable[[], bool], workers: list[Worker], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        for worker in workers:
            assert worker.proc.poll() is None, (
                f"{what}: a worker exited: {worker.errors.read_text()}"
            )
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def start(worker: Worker, workspace_root: Path, script: str) -> tuple[str, Path]:
    """Start a thread on ``worker`` in a workspace of its own; it stops at the approval."""
    tid, name = str(uuid.uuid4()), f"w-{uuid.uuid4().hex[:8]}"
    worker.send("start", tid, workspace=name, script=script)
    got = worker.reply()
    assert got["outcome"] == "done" and got["asks_approval"], got
    return tid, folder(workspace_root, name)


def test_any_worker_finishes_a_thread_another_started(workers, workspace_root, script):
    """Thread k is planned by worker k, approved by worker k+1 (all three at once: distinct
    threads never wait for each other), and worker k+2 resumes it finished: nothing reruns."""
    threads = [start(worker, workspace_root, script) for worker in workers]
    for _, ws in threads:
        open_gates(ws)
    for k, (tid, _) in enumerate(threads):
        workers[(k + 1) % 3].send("approve", tid)
    approvals = [workers[(k + 1) % 3].reply() for k in range(3)]
    assert [a["outcome"] for a in approvals] == ["done"] * 3, approvals
    assert [a["status"] for a in approvals] == ["succeeded"] * 3, approvals
    assert len({a["pid"] for a in approvals}) == 3

    for k, (tid, ws) in enumerate(threads):
        workers[(k + 2) % 3].send("resume", tid)
        again = workers[(k + 2) % 3].reply()
        assert again["outcome"] == "done" and again["status"] == "succeeded", again
        assert counts(ws, "start") == counts(ws, "end") == dict.fromkeys(LABELS, 1)


def test_three_workers_resuming_one_thread_run_it_once(workers, workspace_root, script):
    """All three approve one plan at once: one runs it, two are refused while it runs. The
    runner dies mid-step; another worker finishes the thread, and each step ends once."""
    tid, ws = start(workers[0], workspace_root, script)
    for worker in workers:
        worker.send("approve", tid)
    wait_until(lambda: "start one" in log(ws), workers, "a worker entered step 1")
    wait_until(lambda: sum(w.has_reply() for w in workers) == 2, workers, "two refusals")
    losers = [w for w in workers if w.has_reply()]
    [winner] = [w for w in workers if not w.has_reply()]
    for refused in (w.reply() for w in losers):
        assert refused["outcome"] == "busy", refused
        assert f"thread {tid} is busy" in refused["error"]
    assert counts(ws, "end") == {"one": 0, "two": 0}  # refused without running anything

    winner.proc.send_signal(signal.SIGKILL)  # dies inside step 1, holding the thread
    winner.proc.wait()
    open_gates(ws)
    taker = losers[0]
    outcome: dict[str, Any] = {"outcome": "busy"}
    deadline = time.monotonic() + DEADLINE
    while outcome["outcome"] == "busy":  # until PostgreSQL has ended the dead worker's session
        assert time.monotonic() < deadline, "the dead worker's lock was never released"
        taker.send("resume", tid)
        outcome = taker.reply()
    assert outcome["outcome"] == "done" and outcome["status"] == "succeeded", outcome
    assert counts(ws, "end") == {"one": 1, "two": 1}  # step 1 died unfinished: it ran again
    assert counts(ws, "start") == {"one": 2, "two": 1}

    losers[1].send("resume", tid)
    assert losers[1].reply()["status"] == "succeeded"
    assert counts(ws, "end") == {"one": 1, "two": 1}


def test_a_thread_in_a_shared_workspace_resumes_there(fresh_db, workspace_root, script):
    """A worker that did not start the thread (a Runs of its own) resumes it in the shared
    workspace its context names, not in a folder of that name below its own working folder."""
    from planexec import Context
    from planexec.runs import Runs, new_run
    from tests.integration.runs_worker import TOOLS

    name = f"w-{uuid.uuid4().hex[:8]}"
    ws = folder(workspace_root, name)
    context = Context(planner_model=f"scripted:{script}", approval="first", shared_folder=name)
    with Runs.open(fresh_db, tools=TOOLS) as first:
        started = first.start(new_run("gate test", context=context))
    assert started.request is not None
    open_gates(ws)
    with Runs.open(fresh_db, tools=TOOLS) as other:
        done = other.resume(started.thread_id, {"action": "approve"})
        assert other.get(started.thread_id).saved_context["shared_folder"] == name
    assert done.status == "succeeded"
    assert counts(ws, "end") == {"one": 1, "two": 1}


def test_workers_starting_together_create_the_tables_in_turn(fresh_db):
    """Opening a saver creates its tables; CREATE TABLE IF NOT EXISTS run by two sessions at
    once can fail ("duplicate key ... pg_type_typname_nsp_index"), so setups take turns under
    an advisory lock: held here, three openers wait for it, then all open the database. The
    holder's setup runs CREATE INDEX CONCURRENTLY, which waits for every running transaction:
    openers blocked in pg_advisory_lock would be such transactions (a deadlock), so they poll."""
    from planexec.runs import Runs
    from planexec.storage.persistence import SETUP_LOCK_KEY

    def waiting() -> int:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'"
        ).fetchone()
        return int(row[0]) if row else 0

    opened: list[object] = []

    def open_runs() -> None:
        try:
            with Runs.open(fresh_db) as runs:
                opened.append(len(runs.threads()))
        except Exception as exc:  # shown by the assertion below
            opened.append(exc)

    with psycopg.connect(fresh_db, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK_KEY,))
        openers = [threading.Thread(target=open_runs) for _ in range(3)]
        for opener in openers:
            opener.start()
        wait_until(lambda: waiting() == 3, [], "three setups waiting for the lock")
        time.sleep(0.5)  # they keep waiting while the lock is held
        assert opened == []
        admin.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))
        for opener in openers:
            opener.join(timeout=DEADLINE)
    assert opened == [0, 0, 0]
