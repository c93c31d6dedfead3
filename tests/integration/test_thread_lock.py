"""One run per thread at a time: a second run on a busy thread fails fast, each step runs once.

Two processes (SQLite file or PostgreSQL, sync and async), two threads or two tasks of one
process, the CLI, and the LangGraph server (whose own multitask strategies decide there).
Each step's tool appends ``end LABEL`` to a log when it finishes its side effect, so the log
counts how many times each step really ran. Every run works in the shared workspace ``ws``
below the test's workspace root; the CLI's in the one folder it chose.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError
from typer.testing import CliRunner

from planexec import Context, build_graph
from planexec.admission import admit
from planexec.cli import app
from planexec.state import State
from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.storage.thread_lock import ThreadBusyError, advisory_key, hold
from planexec.tools.sandbox import Sandbox
from tests.helpers import ROOT
from tests.integration.lock_tools import LABELS, PLAN, TOOLS, ends, log_lines
from tests.integration.lock_worker import setup
from tests.servers import langgraph_dev

APPROVE = Command(resume={"action": "approve"})
ONCE = dict.fromkeys(LABELS, 1)
FAST = 0.5  # a refused run answers within this many seconds; a run holds its thread ~1 s
WS = "ws"  # the name of the runs' workspace: ROOT/shared/ws below the test's workspace root


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "planner.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": PLAN}]}]))
    return path


@pytest.fixture
def ws(workspace_root: Path) -> Path:
    """The shared folder named ``WS`` below the test's workspace root."""
    path = Sandbox.at(workspace_root).workspace_path(WS, None)
    path.mkdir(parents=True)
    return path


def context(script: Path) -> Context:
    return Context(planner_model=f"scripted:{script}", shared_folder=WS)


def pythonpath() -> str:
    """This checkout's sources first, then the caller's PYTHONPATH: what a subprocess imports."""
    caller = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(ROOT / "src"), str(ROOT), *([caller] if caller else [])])


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def database(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind.startswith("postgres"):
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "runs.sqlite")


@contextmanager
def sync_saver(db: str) -> Iterator[Any]:
    opener = postgres_saver if db.startswith("postgresql://") else sqlite_saver
    with opener(db) as saver:
        yield saver


def plan_and_stop_at_approval(
    db: str, thread_id: str, script: Path, cli_folder: Path | None = None
) -> None:
    """Plan in the workspace ``WS``, or as the CLI would in ``cli_folder``; stop at approval."""
    mode, workspace = ("cli", str(cli_folder)) if cli_folder else ("sync", WS)
    ctx, sandbox, metadata, _ = setup(mode, db, workspace, str(script))
    with sync_saver(db) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS, **sandbox)
        cfg = {**config(thread_id), "metadata": metadata}
        out = graph.invoke({"task": "lock test"}, cfg, context=ctx)
        assert out["__interrupt__"][0].value["type"] == "plan_approval"


def wait_until(check: Callable[[], bool], procs: list[subprocess.Popen], what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():
        for proc in procs:
            assert proc.poll() is None, f"{what}: a worker exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


# -- two processes ------------------------------------------------------------------------


class Worker:
    """Runs in their own process, each started on a signal (tests/integration/lock_worker.py).

    ``ws`` is the folder of the workspace ``WS`` (mode ``sync`` or ``async``; the process
    inherits the test's workspace root) or, in mode ``cli``, the CLI's folder.
    """

    def __init__(
        self, name: str, actions: str, db: str, ws: Path, tid: str, script: Path, mode: str
    ):
        self.name, self.ws = name, ws
        workspace = str(ws) if mode == "cli" else WS
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.lock_worker", name, actions, db, workspace]
            + [tid, str(script), mode],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> bool:
        return (self.ws / f"ready-{self.name}").exists()

    def go(self, i: int = 0) -> None:
        (self.ws / f"go-{self.name}-{i}").touch()

    def outcome(self, i: int = 0) -> dict[str, Any]:
        path = self.ws / f"outcome-{self.name}-{i}.json"
        wait_until(path.exists, [self.proc], f"{self.name}'s run {i} ended")
        return json.loads(path.read_text())

    def finish(self) -> None:
        _, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err


def started(ws: Path, label: str) -> Callable[[], bool]:
    return lambda: f"start {label}" in log_lines(ws)


def advisory_locks(url: str, thread_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s",
            (advisory_key(thread_id),),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_approving_one_plan_run_each_step_once(
    kind, mode, tmp_path, ws, script, request
):
    """The loser is refused at once; when the winner dies, the loser resumes the thread."""
    db, tid = database(kind, tmp_path, request), str(uuid.uuid4())
    plan_and_stop_at_approval(db, tid, script)
    first = Worker("first", "approve", db, ws, tid, script, mode)
    second = Worker("second", "approve,resume", db, ws, tid, script, mode)
    procs = [first.proc, second.proc]
    wait_until(lambda: first.ready() and second.ready(), procs, "workers ready")

    first.go()
    wait_until(started(ws, "one"), procs, "the first run's step 1 started")
    second.go(0)
    lost = second.outcome(0)
    assert lost["outcome"] == "busy", lost
    assert f"thread {tid} is busy" in lost["error"]
    assert lost["seconds"] < FAST and "end one" not in lost["log"]  # refused mid-run, at once

    # the winner dies mid-plan (SIGKILL): its lock goes with it, the loser takes over
    wait_until(started(ws, "two"), procs, "the first run's step 2 started")
    time.sleep(0.3)  # step 1's result is saved in the background as step 2 starts; 2 runs on
    if kind == "postgres":
        assert advisory_locks(db, tid) == 1
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    killed = time.monotonic()
    if kind == "postgres":  # the server ends the dead client's session, and its locks
        wait_until(lambda: advisory_locks(db, tid) == 0, [second.proc], "lock released")
        assert time.monotonic() - killed < 2.0
    second.go(1)
    resumed = second.outcome(1)
    second.finish()
    assert resumed["outcome"] == "done", resumed
    assert resumed["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE  # step 1 before the kill; 2 (cut by the kill) and 3 after it
    assert log_lines(ws).count("start two") == 2

    # the thread is intact: a late approval of the same plan finds it finished, runs nothing
    with sync_saver(db) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        out = graph.invoke(APPROVE, config(tid), context=context(script))
    assert out["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE


# -- one process ---------------------------------------------------------------------------


@contextmanager
def two_graphs(kind: str, db: str) -> Iterator[tuple[Any, Any]]:
    """Two graphs on one thread store: one saver shared, or two savers of one database."""
    with ExitStack() as stack:
        if kind == "memory":
            first = second = InMemorySaver()
        else:
            first = stack.enter_context(sync_saver(db))
            second = stack.enter_context(sync_saver(db)) if kind.endswith("two-savers") else first
        yield (
            build_graph(checkpointer=first, tools=TOOLS),
            build_graph(checkpointer=second, tools=TOOLS),
        )


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", "sqlite-two-savers", "postgres", "postgres-two-savers"]
)
def test_two_threads_of_one_process_run_each_step_once(kind, tmp_path, ws, script, request):
    db, tid = database(kind, tmp_path, request), str(uuid.uuid4())
    ctx = context(script)
    with two_graphs(kind, db) as (graph_a, graph_b):
        graph_a.invoke({"task": "lock test"}, config(tid), context=ctx)
        results: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: results.update(a=graph_a.invoke(APPROVE, config(tid), context=ctx))
        )
        runner.start()
        wait_until(started(ws, "one"), [], "step 1 started")

        began = time.monotonic()
        with pytest.raises(ThreadBusyError, match=f"thread {tid} is busy"):
            graph_b.invoke(APPROVE, config(tid), context=ctx)
        assert time.monotonic() - began < FAST
        # reading the thread is never blocked; writing to it is refused like a run
        assert graph_b.get_state(config(tid)).next == ("executor",)
        with pytest.raises(ThreadBusyError):
            graph_b.update_state(config(tid), {"task": "changed while running"})
        runner.join(60)

    assert results["a"]["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE


@asynccontextmanager
async def two_async_graphs(kind: str, db: str) -> AsyncIterator[tuple[Any, Any]]:
    async with AsyncExitStack() as stack:
        if kind == "memory":
            first = second = InMemorySaver()
        else:
            opener = async_postgres_saver if kind.startswith("postgres") else async_sqlite_saver
            first = await stack.enter_async_context(opener(db))
            second = (
                await stack.enter_async_context(opener(db))
                if kind.endswith("two-savers")
                else first
            )
        yield (
            build_graph(checkpointer=first, tools=TOOLS),
            build_graph(checkpointer=second, tools=TOOLS),
        )


@pytest.mark.parametrize("kind", ["memory", "sqlite", "sqlite-two-savers", "postgres"])
async def test_two_tasks_of_one_event_loop_run_each_step_once(kind, tmp_path, ws, script, request):
    db, tid = database(kind, tmp_path, request), str(uuid.uuid4())
    ctx = context(script)
    async with two_async_graphs(kind, db) as (graph_a, graph_b):
        await graph_a.ainvoke({"task": "lock test"}, config(tid), context=ctx)
        first = asyncio.create_task(graph_a.ainvoke(APPROVE, config(tid), context=ctx))
        while not started(ws, "one")():
            assert not first.done(), first
            await asyncio.sleep(0.005)
        began = time.monotonic()
        with pytest.raises(ThreadBusyError, match=f"thread {tid} is busy"):
            await graph_b.ainvoke(APPROVE, config(tid), context=ctx)
        assert time.monotonic() - began < FAST
        assert (await graph_b.aget_state(config(tid))).next == ("executor",)
        out = await first
    assert out["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE


# -- every way a run ends releases its thread ----------------------------------------------


def test_a_run_that_raises_or_is_closed_early_releases_its_thread(tmp_path, ws, script):
    tid, ctx = str(uuid.uuid4()), context(script)
    with sqlite_saver(tmp_path / "runs.sqlite") as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        broken = Context(planner_model="scripted:/no/such/replies.json", shared_folder=WS)
        with pytest.raises(Exception, match="replies.json"):  # the planner node raises
            graph.invoke({"task": "lock test"}, config(tid), context=broken)

        stream = graph.stream({"task": "lock test"}, config(tid), context=ctx)
        next(stream)  # the planner's update: the run is under way, holding its thread
        with pytest.raises(ThreadBusyError):
            graph.invoke(None, config(tid), context=ctx)
        stream.close()  # the caller stops reading: the run ends and lets go of the thread

        with pytest.raises(RuntimeError, match="the caller gives up"):
            for _ in graph.stream(None, config(tid), context=ctx):
                raise RuntimeError("the caller gives up")

        out = graph.invoke(None, config(tid), context=ctx)  # free again: on to the approval
        assert out["__interrupt__"][0].value["type"] == "plan_approval"
        assert graph.invoke(APPROVE, config(tid), context=ctx)["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE
    assert not list((tmp_path / "runs.sqlite-planexec-locks").iterdir())  # no lock files left


async def test_an_async_run_closed_early_or_cancelled_releases_its_thread(tmp_path, ws, script):
    tid, ctx = str(uuid.uuid4()), context(script)
    async with async_sqlite_saver(tmp_path / "runs.sqlite") as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        stream = graph.astream({"task": "lock test"}, config(tid), context=ctx)
        await stream.__anext__()
        with pytest.raises(ThreadBusyError):
            await graph.ainvoke(None, config(tid), context=ctx)
        await stream.aclose()

        await graph.ainvoke(None, config(tid), context=ctx)  # to the approval
        task = asyncio.create_task(graph.ainvoke(APPROVE, config(tid), context=ctx))
        while not started(ws, "one")():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while not ends(ws)["one"]:  # the cancelled call of step 1 ends on its own thread
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)

        out = await graph.ainvoke(None, config(tid), context=ctx)
        assert out["final"]["status"] == "succeeded"
    assert ends(ws)["two"] == 1 and ends(ws)["three"] == 1


def test_a_nested_call_runs_inside_the_run_that_holds_the_thread(ws, script):
    """A planexec graph used as a subgraph runs under its parent's hold, not against it."""
    outer = StateGraph(State)
    outer.add_node("inner", build_graph(tools=TOOLS))
    outer.add_edge(START, "inner")
    graph = admit(outer.compile(checkpointer=InMemorySaver()))
    tid, ctx = str(uuid.uuid4()), context(script)
    out = graph.invoke({"task": "lock test"}, config(tid), context=ctx)
    assert out["__interrupt__"][0].value["type"] == "plan_approval"
    assert graph.invoke(APPROVE, config(tid), context=ctx)["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_resume_of_a_busy_thread_says_so_in_one_line(tmp_path, script, monkeypatch):
    """A CLI thread (in the folder `planexec run` chose for it) runs in another process."""
    monkeypatch.chdir(tmp_path)
    db, tid = str(tmp_path / "runs.sqlite"), str(uuid.uuid4())
    ws = Sandbox.at().workspace_path(None, tid)  # the CLI's default folder for the thread
    slow = json.loads(json.dumps(PLAN))
    slow["steps"][0]["args"]["seconds"] = 3.0  # the CLI's resume surely comes while it runs
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": slow}]}]))
    plan_and_stop_at_approval(db, tid, script, cli_folder=ws)
    holder = Worker("holder", "approve", db, ws, tid, script, "cli")
    wait_until(holder.ready, [holder.proc], "worker ready")
    holder.go()
    wait_until(started(ws, "one"), [holder.proc], "the holder's step 1 started")

    result = CliRunner().invoke(app, ["resume", tid, "--yes", "--db", db])
    assert result.exit_code == 2, result.output
    where, refusal = result.output.strip().splitlines()  # which thread, then the one-line error
    assert where.startswith(f"thread {tid} · workspace "), where
    assert refusal.startswith(f"error: thread {tid} is busy"), refusal
    assert "Traceback" not in result.output

    assert holder.outcome()["final"]["status"] == "succeeded"
    holder.finish()
    assert ends(ws) == ONCE
    after = CliRunner().invoke(app, ["resume", tid, "--yes", "--db", db])
    assert after.exit_code == 0 and "already finished" in after.output
    assert ends(ws) == ONCE


# -- the LangGraph server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def lock_server_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The operator's workspace root of the served graph (PLANEXEC_WORKSPACE_ROOT)."""
    return tmp_path_factory.mktemp("lock-server-root")


@pytest.fixture(scope="module")
def lock_server(tmp_path_factory: pytest.TempPathFactory, lock_server_root: Path) -> Iterator[str]:
    """``langgraph dev`` serving planexec with the counting tool, as graph ``lockgraph``."""
    folder = tmp_path_factory.mktemp("lock-server")
    served = folder / "langgraph.json"
    graph = ROOT / "tests" / "integration" / "lock_tools.py"
    served.write_text(
        json.dumps({"dependencies": [str(ROOT)], "graphs": {"lockgraph": f"{graph}:graph"}})
    )
    env = {"PLANEXEC_WORKSPACE_ROOT": str(lock_server_root), "PYTHONPATH": pythonpath()}
    with langgraph_dev(folder / "langgraph-dev.log", env, config=served) as url:
        yield url


@pytest.mark.server
@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
def test_server_second_run_on_a_busy_thread_follows_the_multitask_strategy(
    lock_server, lock_server_root, strategy, script
):
    """The server serialises a thread's runs itself; planexec's lock never gets in its way.

    ``reject`` refuses the second run (409) and ``enqueue`` runs it after the first: each step
    runs once. ``interrupt`` and ``rollback`` cancel the first run mid-step: the tool call in
    flight still finishes its side effect (a thread cannot be killed), and the second run
    refuses to start that step again while it runs (the step fails, saying so): no side effect
    happens twice.
    """
    name = f"lock-{uuid.uuid4().hex[:8]}"  # one workspace of the server's root per test
    ws = Sandbox.at(lock_server_root).workspace_path(name, None)
    ctx = {"planner_model": f"scripted:{script}", "shared_folder": name}
    approve = {"resume": {"action": "approve"}}

    async def scenario() -> dict[str, Any]:
        client = get_client(url=lock_server)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "lockgraph", input={"task": "lock test"}, context=ctx)
        assert (await client.threads.get(tid))["status"] == "interrupted"
        first = await client.runs.create(tid, "lockgraph", command=approve, context=ctx)
        while not started(ws, "one")():
            await asyncio.sleep(0.01)
        if strategy == "reject":
            with pytest.raises(ConflictError):
                await client.runs.create(
                    tid, "lockgraph", command=approve, context=ctx, multitask_strategy="reject"
                )
            await client.runs.join(tid, first["run_id"])
            runs = [first]
        else:
            second = await client.runs.create(
                tid, "lockgraph", command=approve, context=ctx, multitask_strategy=strategy
            )
            await client.runs.join(tid, second["run_id"])
            runs = [first, second] if strategy == "enqueue" else [second]
        statuses = [(await client.runs.get(tid, run["run_id"]))["status"] for run in runs]
        state = await client.threads.get_state(tid)
        return {"statuses": statuses, "final": state["values"]["final"]}

    outcome = asyncio.run(scenario())
    assert outcome["statuses"] == ["success"] * len(outcome["statuses"]), outcome
    if strategy in ("reject", "enqueue"):
        assert outcome["final"]["status"] == "succeeded"
        assert ends(ws) == ONCE
    else:  # the second run does not start step 1 while the cancelled run's call of it runs on
        [step_one] = [f for f in outcome["final"]["failed_steps"] if f["step"] == 1]
        assert "is still running" in step_one["error"], outcome
        time.sleep(0.8)  # the cancelled run's tool call ends on its own thread
        assert ends(ws) == {"one": 1, "two": 0, "three": 0}  # no side effect twice


# -- the lock's own failure modes -------------------------------------------------------------


def test_a_broken_lock_connection_takes_its_locks_again(postgres_url):
    """The server ends the lock session (restart, network cut): the next lock reconnects and
    takes the locks of the runs still going again."""
    with postgres_saver(postgres_url) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        running, later = str(uuid.uuid4()), str(uuid.uuid4())
        with hold(graph, config(running)):
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                    " AND ((classid::bigint << 32) | objid::bigint) = %s",
                    (advisory_key(running),),
                )
            wait_until(lambda: advisory_locks(postgres_url, running) == 0, [], "session ended")
            with hold(graph, config(later)):
                assert advisory_locks(postgres_url, running) == 1
                assert advisory_locks(postgres_url, later) == 1
        assert advisory_locks(postgres_url, running) == advisory_locks(postgres_url, later) == 0


async def test_a_sync_run_on_an_async_saver_is_held_like_an_async_one(tmp_path, ws, script):
    tid, ctx = str(uuid.uuid4()), context(script)
    async with async_sqlite_saver(tmp_path / "runs.sqlite") as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        await graph.ainvoke({"task": "lock test"}, config(tid), context=ctx)
        sync_run = asyncio.create_task(
            asyncio.to_thread(graph.invoke, APPROVE, config(tid), context=ctx)
        )
        while not started(ws, "one")():
            await asyncio.sleep(0.005)
        with pytest.raises(ThreadBusyError):
            await graph.ainvoke(APPROVE, config(tid), context=ctx)
        assert (await sync_run)["final"]["status"] == "succeeded"
    assert ends(ws) == ONCE
