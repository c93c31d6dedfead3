"""A planexec run in its own process, for the kill-and-resume tests.

python -m tests.integration.crash_worker start|resume DB WORKSPACE THREAD SCRIPT MODE
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from langchain_core.tools import tool
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.tools import ToolRegistry
from planexec.tools.workspace import current_workspace


@tool
def append_line(label: str, seconds: float) -> dict:
    """Work for some seconds, then append the label to log.txt (the side effect we count)."""
    time.sleep(seconds)
    log = current_workspace().resolve("log.txt")
    with log.open("a") as handle:
        handle.write(label + "\n")
    return {"label": label}


def main() -> None:
    action, db, workspace, thread_id, script, mode = sys.argv[1:7]
    context = Context(planner_model=f"scripted:{script}", workspace=workspace)
    config = {"configurable": {"thread_id": thread_id}}
    registry = ToolRegistry([append_line])

    if mode == "sync":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as saver:
            graph = build_graph(checkpointer=saver, tools=registry)
            if action == "start":
                graph.invoke({"task": "crash test"}, config, context=context)
                out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
            else:
                out = graph.invoke(None, config, context=context)
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async def run() -> dict:
            async with AsyncSqliteSaver.from_conn_string(db) as saver:
                graph = build_graph(checkpointer=saver, tools=registry)
                if action == "start":
                    await graph.ainvoke({"task": "crash test"}, config, context=context)
                    return await graph.ainvoke(
                        Command(resume={"action": "approve"}), config, context=context
                    )
                return await graph.ainvoke(None, config, context=context)

        out = asyncio.run(run())
    Path(workspace, "result.json").write_text(
        json.dumps(
            {
                "final": out["final"],
                "steps": {
                    k: {"status": v["status"], "output": v["output"]}
                    for k, v in out["steps"].items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
