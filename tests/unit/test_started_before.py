"""What ``started_before`` reads: LangGraph keeps a finished task's result as a pending write.

A node whose tasks finished and which then failed leaves their results in the checkpoint's
pending writes (channel ``__return__``) until the node ends; a resume of that node sees them.
The planner relies on it to find the steps an earlier attempt started while the plan streamed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import task
from langgraph.graph import StateGraph
from typing_extensions import TypedDict

from planexec.execution.streaming import started_before


class S(TypedDict, total=False):
    done: bool


@task
def a_step(i: int) -> dict[str, Any]:
    return {"id": i, "status": "succeeded", "ran": "0123456789abcdef"}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_resumed_node_sees_the_results_of_its_earlier_attempts_tasks(asynchronous):
    seen: list[frozenset[str]] = []
    fail = [True]

    def node(state: S, config: RunnableConfig) -> dict[str, Any]:
        seen.append(asyncio.run(started_before(config, sync_run=not asynchronous)))
        if fail[0]:
            for future in [a_step(i) for i in range(2)]:
                future.result()
            fail[0] = False
            raise RuntimeError("the process died")
        return {"done": True}

    builder = StateGraph(S)
    builder.add_node("planner", node)
    builder.set_entry_point("planner")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError):
        graph.invoke({"done": False}, config)
    assert graph.invoke(None, config) == {"done": True}
    graph.invoke({"done": False}, {"configurable": {"thread_id": "fresh"}})
    finished = frozenset({"0123456789abcdef"})  # the digest each result names (ran)
    assert seen == [frozenset(), finished, frozenset()]  # first attempt, resumed, a fresh run
