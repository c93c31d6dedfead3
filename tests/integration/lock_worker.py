"""planexec runs in their own process, each started on a signal, for the thread-lock tests.

python -m tests.integration.lock_worker NAME ACTIONS DB WORKSPACE THREAD SCRIPT MODE

MODE ``sync`` or ``async``: WORKSPACE is a workspace name, the run works in the shared
workspace of that name below the operator's root (``$PLANEXEC_WORKSPACE_ROOT``). MODE ``cli``:
WORKSPACE is a folder and the run works there as the CLI's would (async, in the CLI's
one-folder sandbox, with the settings ``planexec resume`` reads kept in its checkpoints).

Opens the saver (SQLite file or postgresql:// URL) and builds the graph, writes
``ready-NAME`` into the workspace's folder, then for each of the comma-separated ACTIONS
(the i-th, from 0) waits for ``go-NAME-i`` there, runs it (``approve``: resume the approval
with approve; ``resume``: continue with None) and writes ``outcome-NAME-i.json``:
``{"outcome": "done"|"busy", "seconds", "error", "final", "log"}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from langgraph.types import Command

from planexec import Context, build_graph
from planexec.runs import run_settings, sandbox_for
from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.storage.thread_lock import ThreadBusyError
from planexec.tools.sandbox import Sandbox
from tests.integration.lock_tools import TOOLS, log_lines


def payload(action: str) -> Any:
    return {"approve": Command(resume={"action": "approve"}), "resume": None}[action]


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)


def setup(
    mode: str, db: str, workspace: str, script: str
) -> tuple[Context, dict[str, Any], dict[str, Any], Path]:
    """A run's context, build_graph's sandbox arguments, its config's metadata and its folder.

    ``cli``: the folder WORKSPACE, as ``planexec run --workspace WORKSPACE`` runs there (and
    ``planexec resume`` finds it again); else the shared folder named WORKSPACE.
    """
    planner = f"scripted:{script}"
    if mode == "cli":
        sandbox = sandbox_for(workspace, db)
        context = Context(planner_model=planner)
        return context, {"sandbox": sandbox}, run_settings(context, sandbox), sandbox.root
    folder = Sandbox.at().workspace_path(workspace, None)
    return Context(planner_model=planner, shared_folder=workspace), {}, {}, folder


def main() -> None:
    name, actions, db, workspace, thread_id, script, mode = sys.argv[1:8]
    context, sandbox, metadata, ws = setup(mode, db, workspace, script)
    config = {"configurable": {"thread_id": thread_id}, "metadata": metadata}
    ws.mkdir(parents=True, exist_ok=True)

    def record(i: int, started: float, out: dict | None, error: Exception | None) -> None:
        result = {
            "outcome": "busy" if error else "done",
            "seconds": time.monotonic() - started,
            "error": str(error) if error else None,
            "final": (out or {}).get("final"),
            "log": log_lines(ws),  # what the steps had done when this run ended
        }
        written = ws / f".outcome-{name}-{i}.json"
        written.write_text(json.dumps(result))
        written.replace(ws / f"outcome-{name}-{i}.json")  # whole: the test reads it once there

    if mode == "sync":
        opener = postgres_saver if db.startswith("postgresql://") else sqlite_saver
        with opener(db) as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS, **sandbox)
            (ws / f"ready-{name}").touch()
            for i, action in enumerate(actions.split(",")):
                wait_for(ws / f"go-{name}-{i}")
                started = time.monotonic()
                try:
                    out = graph.invoke(payload(action), config, context=context)
                except ThreadBusyError as exc:
                    record(i, started, None, exc)
                else:
                    record(i, started, out, None)
        return

    async def run() -> None:
        opener = async_postgres_saver if db.startswith("postgresql://") else async_sqlite_saver
        async with opener(db) as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS, **sandbox)
            (ws / f"ready-{name}").touch()
            for i, action in enumerate(actions.split(",")):
                await asyncio.to_thread(wait_for, ws / f"go-{name}-{i}")
                started = time.monotonic()
                try:
                    out = await graph.ainvoke(payload(action), config, context=context)
                except ThreadBusyError as exc:
                    record(i, started, None, exc)
                else:
                    record(i, started, out, None)

    asyncio.run(run())


if __name__ == "__main__":
    main()
