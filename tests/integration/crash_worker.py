"""A planexec run in its own process, for the kill-and-resume and multi-worker tests.

python -m tests.integration.crash_worker ACTION DB WORKSPACE THREADS SCRIPT MODE

ACTION: start (plan, approve, run), plan (stop at approval), approve (approve and run),
resume (continue). THREADS: comma-separated thread ids. DB: a SQLite file or a postgresql://
URL. MODE: sync or async, with "-never" for approval never (steps start while the plan streams).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.tools import ToolRegistry
from planexec.tools.sandbox import Sandbox
from planexec.tools.workspace import current_workspace


@tool
def append_line(label: str, seconds: float) -> dict:
    """Work for some seconds, then append the label to log.txt (the side effect we count)."""
    time.sleep(seconds)
    log = current_workspace().resolve("log.txt")
    with log.open("a") as handle:
        handle.write(label + "\n")
    return {"label": label}


@tool
def broken(reason: str) -> dict:
    """Append "broken" to log.txt, then fail (a step the replanner works around)."""
    with current_workspace().resolve("log.txt").open("a") as handle:
        handle.write("broken\n")
    raise ValueError(f"it failed: {reason}")


@contextmanager
def sync_saver(db: str) -> Iterator[Any]:
    if db.startswith("postgresql://"):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            yield saver


@asynccontextmanager
async def async_saver(db: str) -> AsyncIterator[Any]:
    if db.startswith("postgresql://"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(db) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(db) as saver:
            yield saver


def inputs(action: str) -> list[Any]:
    approve = Command(resume={"action": "approve"})
    return {
        "start": [{"task": "crash test"}, approve],
        "run": [{"task": "crash test"}],  # approval never: nothing to approve
        "plan": [{"task": "crash test"}],
        "approve": [approve],
        "resume": [None],
    }[action]


def save(workspace: str, thread_id: str, out: dict) -> None:
    Path(workspace, f"result-{thread_id}.json").write_text(
        json.dumps(
            {
                "final": out.get("final"),
                "steps": {
                    k: {"status": v["status"], "output": v.get("output")}
                    | ({"error": v["error"]} if v.get("error") else {})
                    for k, v in out.get("steps", {}).items()
                },
                "question": "".join(
                    str(i.value.get("description", "")) for i in out.get("__interrupt__", [])
                ),
            }
        )
    )


def main() -> None:
    action, db, workspace, threads, script, mode = sys.argv[1:7]
    policy = "never" if mode.endswith("-never") else "first"
    context = Context(planner_model=f"scripted:{script}", approval=policy)
    sandbox = Sandbox.one_folder(workspace, outputs=f"{workspace}.outputs")
    registry = ToolRegistry()
    for item in (append_line, broken):  # declared harmless: log.txt only counts the calls
        registry.register(item, side_effects=False)
    if mode.startswith("sync"):
        with sync_saver(db) as saver:
            graph = build_graph(
                checkpointer=saver, tools=registry, sandbox=sandbox, approval=policy
            )
            for tid in threads.split(","):
                config = {"configurable": {"thread_id": tid}}
                for payload in inputs(action):
                    out = graph.invoke(payload, config, context=context)
                save(workspace, tid, out)
        return

    async def run() -> None:
        async with async_saver(db) as saver:
            graph = build_graph(
                checkpointer=saver, tools=registry, sandbox=sandbox, approval=policy
            )
            for tid in threads.split(","):
                config = {"configurable": {"thread_id": tid}}
                for payload in inputs(action):
                    out = await graph.ainvoke(payload, config, context=context)
                save(workspace, tid, out)

    asyncio.run(run())


if __name__ == "__main__":
    main()
