"""A worker process of the three-worker tests: the async runs API on a shared PostgreSQL.

python -m tests.integration.runs_worker POSTGRES_URL

Opens ``Runs.aopen(POSTGRES_URL)`` with the ``gate`` tool, prints ``{"ready": PID}``, then
runs one command per stdin line (JSON), one at a time, and prints one reply line for each:

- ``{"op": "start", "thread_id", "workspace", "script"}``: a new run of the gate plan in the
  shared workspace named ``workspace`` (below ``$PLANEXEC_WORKSPACE_ROOT``), planned by the
  scripted planner ``script``; it stops at the plan approval;
- ``{"op": "approve", "thread_id"}``: resume the thread, approving its plan;
- ``{"op": "resume", "thread_id"}``: resume the thread with no answer.

A reply is ``{"outcome": "done", "status", "asks_approval", "pid"}``, ``{"outcome": "busy",
"error", "pid"}`` (another run holds the thread), or ``{"outcome": "error", "error", "pid"}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from langchain_core.tools import tool

from planexec import Context
from planexec.runs import Runs, new_run
from planexec.storage.thread_lock import ThreadBusyError
from planexec.tools import ToolRegistry
from planexec.tools.workspace import current_workspace
from tests.helpers import plan_of, step

GATE_TIMEOUT = 30.0  # only a broken test waits this long


def _append(line: str) -> None:
    with current_workspace().resolve("log.txt").open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool
def gate(label: str) -> dict:
    """Append 'start LABEL', wait until the file 'open-LABEL' exists, then append 'end LABEL'."""
    _append(f"start {label}")
    opened, deadline = current_workspace().resolve(f"open-{label}"), time.monotonic() + GATE_TIMEOUT
    while not opened.exists():  # the test opens the gate: no wall-clock guess
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {label} was never opened")
        time.sleep(0.005)
    _append(f"end {label}")
    return {"label": label}


TOOLS = ToolRegistry([gate])
LABELS = ["one", "two"]
PLAN = plan_of(step(1, "gate", {"label": "one"}), step(2, "gate", {"label": "two"}, [1]))


async def answer(runs: Runs, command: dict[str, Any]) -> dict[str, Any]:
    """Run one command; return its reply."""
    op, thread_id = command["op"], command["thread_id"]
    if op == "start":
        planner, workspace = f"scripted:{command['script']}", command["workspace"]
        context = Context(planner_model=planner, approval="first", shared_folder=workspace)
        result = await runs.astart(new_run("gate test", context=context, thread_id=thread_id))
    else:
        approval = {"action": "approve"} if op == "approve" else None
        result = await runs.aresume(thread_id, approval)
    return {"outcome": "done", "status": result.status, "asks_approval": bool(result.request)}


async def serve(url: str) -> None:
    """Answer commands from stdin until it closes."""
    async with Runs.aopen(url, tools=TOOLS) as runs:
        print(json.dumps({"ready": os.getpid()}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            try:
                reply = await answer(runs, json.loads(line))
            except ThreadBusyError as exc:
                reply = {"outcome": "busy", "error": str(exc)}
            except Exception as exc:  # any other failure: the test shows it
                reply = {"outcome": "error", "error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps({**reply, "pid": os.getpid()}), flush=True)


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
