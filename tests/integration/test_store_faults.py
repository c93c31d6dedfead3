"""PostgreSQL stops mid-run (pg_ctl stop -m immediate) and comes back.

Required: once checkpoint writes fail no new step starts; the error is one line; after the
database returns, a resume re-runs only the steps whose results were not saved.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from langchain_core.tools import tool
from langgraph.types import Command
from typer.testing import CliRunner

from planexec import build_graph
from planexec.storage.store_guard import CheckpointStoreError
from planexec.tools import ToolRegistry
from planexec.tools.workspace import current_workspace
from tests.helpers import plan_of, plan_reply, scripted, step, thread

pytestmark = pytest.mark.server

STEP_SECONDS = 0.4
LABELS = [f"s{i}" for i in range(1, 7)]
CHAIN = plan_of(  # s1 -> s2 -> ... -> s6
    *[
        step(i, "append_line", {"label": label, "seconds": STEP_SECONDS}, [i - 1] if i > 1 else [])
        for i, label in enumerate(LABELS, start=1)
    ]
)


@tool
def append_line(label: str, seconds: float) -> dict:
    """Work for some seconds, then append the label to log.txt (the side effect we count)."""
    time.sleep(seconds)
    with current_workspace().resolve("log.txt").open("a") as handle:
        handle.write(label + "\n")
    return {"label": label}


def log(ws: Path) -> list[str]:
    path = ws / "log.txt"
    return path.read_text().split() if path.exists() else []


def stop_during_s3(server: Any, ws: Path) -> threading.Thread:
    """Stop the server 0.1 s into step 3, when steps 1 and 2 have long been saved."""

    def stop() -> None:
        deadline = time.time() + 10
        while log(ws) != ["s1", "s2"] and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(0.1)
        server.stop()

    killer = threading.Thread(target=stop, daemon=True)
    killer.start()
    return killer


def run_sync(url: str, config: dict, context: Any, payload: Any) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = build_graph(checkpointer=saver, tools=ToolRegistry([append_line]))
        return graph.invoke(payload, config, context=context)


def run_async(url: str, config: dict, context: Any, payload: Any) -> dict[str, Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async def go() -> dict[str, Any]:
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            graph = build_graph(checkpointer=saver, tools=ToolRegistry([append_line]))
            return await graph.ainvoke(payload, config, context=context)

    return asyncio.run(go())


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {"sync": run_sync, "async": run_async}


@pytest.mark.parametrize(
    ("mode", "resume_mode"), [("sync", "sync"), ("async", "async"), ("async", "sync")]
)
def test_no_step_starts_after_the_store_fails_and_resume_reruns_only_unsaved_steps(
    restartable_postgres, use_models, ctx, workspace, mode, resume_mode
):
    use_models(planner=scripted(plan_reply(CHAIN)))
    config, context = thread(), ctx(approval="always")
    first, resume = RUNNERS[mode], RUNNERS[resume_mode]
    first(restartable_postgres.url, config, context, {"task": "t"})  # stops at the approval

    killer = stop_during_s3(restartable_postgres, workspace)
    started = time.time()
    with pytest.raises(CheckpointStoreError) as failure:
        first(restartable_postgres.url, config, context, Command(resume={"action": "approve"}))
    killer.join()
    # s3 was running when the store stopped; it ended, and nothing started after it
    assert log(workspace) == ["s1", "s2", "s3"]
    assert time.time() - started < 3 * STEP_SECONDS + 1.5
    message = str(failure.value)
    assert "\n" not in message and "OperationalError" in message
    assert "not started: 4, 5, 6" in message

    restartable_postgres.start()
    out = resume(restartable_postgres.url, config, context, None)
    assert out["final"]["status"] == "succeeded"
    # only s3, whose result could not be saved, ran twice; s1 and s2 were not run again
    assert log(workspace) == ["s1", "s2", "s3", "s3", "s4", "s5", "s6"]
    assert [out["steps"][str(i)]["attempts"] for i in range(1, 7)] == [1] * 6


REFUSE_WRITES = """
CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'disk full (simulated)'; END $$;
CREATE TRIGGER refuse_writes BEFORE INSERT OR UPDATE ON checkpoint_writes
FOR EACH ROW EXECUTE FUNCTION refuse_writes();
"""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_write_stops_new_steps_while_the_store_still_answers_reads(
    restartable_postgres, use_models, ctx, workspace, mode
):
    """Writes fail, reads work (a full disk, a read-only replica): the failed save is seen."""
    use_models(planner=scripted(plan_reply(CHAIN)))
    config, context, url = thread(), ctx(approval="always"), restartable_postgres.url
    RUNNERS[mode](url, config, context, {"task": "t"})

    def refuse_writes_during_s3() -> None:
        deadline = time.time() + 10
        while log(workspace) != ["s1", "s2"] and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(0.1)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(REFUSE_WRITES)

    saboteur = threading.Thread(target=refuse_writes_during_s3, daemon=True)
    saboteur.start()
    with pytest.raises(CheckpointStoreError) as failure:
        RUNNERS[mode](url, config, context, Command(resume={"action": "approve"}))
    saboteur.join()
    assert "a checkpoint write failed (RaiseException: disk full (simulated))" in str(failure.value)
    ran = log(workspace)
    # s3's save failed; s4 may have started on s3's result before that save was refused
    # (a dependent starts as soon as its dependency's result exists), nothing after it
    assert ran in (["s1", "s2", "s3"], ["s1", "s2", "s3", "s4"])

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER refuse_writes ON checkpoint_writes")
    out = RUNNERS[mode](url, config, context, None)
    assert out["final"]["status"] == "succeeded"
    assert log(workspace) == ran + ran[2:] + LABELS[len(ran) :]  # unsaved ones ran again


def test_the_cli_prints_one_line_and_resumes_after_the_database_returns(
    restartable_postgres, tmp_path, monkeypatch
):
    from planexec import cli, graph
    from planexec.runs import request as run_request
    from planexec.tools import default_registry

    def registry() -> ToolRegistry:
        reg = default_registry()
        reg.register(append_line)
        return reg

    monkeypatch.setattr(graph, "default_registry", registry)
    monkeypatch.setattr(run_request, "default_registry", registry)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps(CHAIN))
    ws, url, runner = tmp_path / "ws", restartable_postgres.url, CliRunner()

    killer = stop_during_s3(restartable_postgres, ws)
    failed = runner.invoke(
        cli.app, ["run", "--plan", "plan.json", "--workspace", "ws", "--yes", "--db", url]
    )
    killer.join()
    assert failed.exit_code == 2, failed.output
    error_lines = failed.stderr.strip().splitlines()
    assert len(error_lines) == 1, failed.stderr
    assert error_lines[0].startswith("error: the checkpoint store failed (OperationalError")
    assert "Traceback" not in failed.output
    assert log(ws) == ["s1", "s2", "s3"]
    assert "step 3 running" in failed.stdout and "step 4 running" not in failed.stdout
    tid = failed.stdout.split("thread ", 1)[1].split()[0]

    restartable_postgres.start()
    resumed = runner.invoke(cli.app, ["resume", tid, "--yes", "--db", url])
    assert resumed.exit_code == 0, resumed.output
    assert log(ws) == ["s1", "s2", "s3", "s3", "s4", "s5", "s6"]


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError(
            "consuming input failed: server closed the connection unexpectedly\n"
            "\tThis probably means the server terminated abnormally"
        ),
        sqlite3.OperationalError("disk I/O error"),
    ],
    ids=["postgres", "sqlite"],
)
def test_a_database_error_anywhere_in_the_cli_is_one_line(error, capsys):
    from planexec.cli.guard import guard

    async def fails() -> int:
        raise error

    with pytest.raises(typer.Exit) as exited:
        guard(fails())
    assert exited.value.exit_code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: the run database failed (OperationalError: ")
    assert "planexec resume" in err
