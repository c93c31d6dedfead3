"""planexec runs in their own process, each started on a signal, for the thread-lock tests.

python -m tests.integration.lock_worker NAME ACTIONS DB WORKSPACE THREAD SCRIPT MODE

Opens the saver (SQLite file or postgresql:// URL; MODE sync or async) and builds the graph,
writes ``ready-NAME`` into WORKSPACE, then for each of the comma-separated ACTIONS (the i-th,
from 0) waits for ``go-NAME-i`` there, runs it (``approve``: resume the approval with approve;
``resume``: continue with None) and writes ``outcome-NAME-i.json``:
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
from planexec.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.thread_lock import ThreadBusyError
from tests.integration.lock_tools import TOOLS, log_lines


def payload(action: str) -> Any:
    return {"approve": Command(resume={"action": "approve"}), "resume": None}[action]


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)


def main() -> None:
    name, actions, db, workspace, thread_id, script, mode = sys.argv[1:8]
    ws = Path(workspace)
    context = Context(planner_model=f"scripted:{script}", workspace=workspace)
    config = {"configurable": {"thread_id": thread_id}}

    def record(i: int, started: float, out: dict | None, error: Exception | None) -> None:
        result = {
            "outcome": "busy" if error else "done",
            "seconds": time.monotonic() - started,
            "error": str(error) if error else None,
            "final": (out or {}).get("final"),
            "log": log_lines(ws),  # what the steps had done when this run ended
        }
        (ws / f"outcome-{name}-{i}.json").write_text(json.dumps(result))

    if mode == "sync":
        opener = postgres_saver if db.startswith("postgresql://") else sqlite_saver
        with opener(db) as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS)
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
            graph = build_graph(checkpointer=saver, tools=TOOLS)
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
