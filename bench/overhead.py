"""Orchestration overhead per step (zero-latency tools) with no saver, in-memory, SQLite, Postgres.

Marginal cost: (time of a 220-step plan - time of a 20-step plan) / 200, best of 7 runs each
(the machine is shared: noise only adds time), so fixed per-run costs cancel out.
Run: python bench/overhead.py   (Postgres is started from Debian's server programs if installed)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import TOOLS, build_graph, context, new_config, table
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.storage.persistence import (
    async_postgres_saver,
    async_sqlite_saver,
    postgres_saver,
    sqlite_saver,
)
from planexec.tools import ToolRegistry

SIZES = (20, 220)
CLOCK = time.perf_counter
"""What a run's time is measured with (bench/floor.py can measure CPU time instead)."""


def flat_plan(n: int) -> dict[str, Any]:
    return {
        "goal": f"{n} independent instant steps",
        "steps": [
            {
                "id": i,
                "tool": "wait",
                "args": {"seconds": 0},
                "description": "noop",
                "depends_on": [],
                "expected_output": "",
            }
            for i in range(1, n + 1)
        ],
    }


def use_plan(n: int) -> None:
    reply = ScriptedReply(tool_calls=[{"name": "Plan", "args": flat_plan(n)}])
    models.load_chat_model = lambda spec, *_: ScriptedChatModel(replies=[reply])


RUNS = 7


def marginal_ms(best: dict[int, float]) -> float:
    """Milliseconds one more step costs, from the best time of each plan size."""
    small, large = SIZES
    return 1000 * (best[large] - best[small]) / (large - small)


def prepare(n: int) -> tuple[dict[str, Any], Any, float]:
    """Make the scripted planner answer with an n-step plan; return a run's input and start."""
    use_plan(n)
    return {"task": "noop"}, new_config(), CLOCK()


def elapsed(out: dict[str, Any], started: float) -> float:
    assert out["final"]["status"] == "succeeded"
    return CLOCK() - started


def timed_invoke(graph: Any, n: int) -> float:
    task, config, started = prepare(n)
    return elapsed(graph.invoke(task, config, context=context(max_parallel_steps=8)), started)


async def timed_ainvoke(graph: Any, n: int) -> float:
    task, config, started = prepare(n)
    out = await graph.ainvoke(task, config, context=context(max_parallel_steps=8))
    return elapsed(out, started)


def sync_ms(saver: Any, tools: ToolRegistry = TOOLS) -> float:
    graph = build_graph(checkpointer=saver, tools=tools)
    return marginal_ms({n: min(timed_invoke(graph, n) for _ in range(RUNS)) for n in SIZES})


async def async_ms(saver: Any, tools: ToolRegistry = TOOLS) -> float:
    graph = build_graph(checkpointer=saver, tools=tools)
    return marginal_ms(
        {n: min([await timed_ainvoke(graph, n) for _ in range(RUNS)]) for n in SIZES}
    )


def tmp_db(name: str) -> str:
    return str(Path(tempfile.mkdtemp()) / name)


async def main() -> None:
    rows: list[list[str]] = []
    with ExitStack() as stack:
        url = None
        try:
            from tests.servers import postgres

            url = stack.enter_context(postgres())
        except Exception as exc:  # the table says Postgres is missing
            print(f"(Postgres skipped: {exc})")
        async with AsyncExitStack() as astack:
            cases: list[tuple[str, Any, Any]] = [
                ("none", None, None),
                ("in-memory", InMemorySaver(), InMemorySaver()),
                (
                    "SQLite, LangGraph defaults (fsync per commit)",
                    stack.enter_context(SqliteSaver.from_conn_string(tmp_db("a.db"))),
                    await astack.enter_async_context(
                        AsyncSqliteSaver.from_conn_string(tmp_db("b.db"))
                    ),
                ),
                (
                    "SQLite, planexec.storage.persistence (WAL, synchronous=NORMAL)",
                    stack.enter_context(sqlite_saver(tmp_db("c.db"))),
                    await astack.enter_async_context(async_sqlite_saver(tmp_db("d.db"))),
                ),
            ]
            if url:
                cases.append(
                    (
                        "Postgres 15 (loopback)",
                        stack.enter_context(postgres_saver(url)),
                        await astack.enter_async_context(async_postgres_saver(url)),
                    )
                )
            for name, sync_saver, async_saver in cases:
                rows.append(
                    [name, f"{sync_ms(sync_saver):.2f}", f"{await async_ms(async_saver):.2f}"]
                )
    print(
        table(
            "Orchestration overhead, ms per step (zero-latency steps, 8 in parallel)",
            ["saver", "invoke (sync)", "ainvoke (async)"],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
