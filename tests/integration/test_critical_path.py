"""Free slots go to the step with the longest remaining chain, not to the first that asks.

Checked by the order in which steps start, not by wall-clock time: the leaves wait until the
last step of the chain has started, which happens without a timeout only if the chain got the
second slot while the first leaf held the other (first come, first served would give both slots
to leaves, which then wait 5 s each for a chain that cannot start).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from planexec import build_graph
from planexec.execution.slots import TYPICAL_LATENCY, chain_ranks
from planexec.tools import ToolRegistry
from tests.helpers import plan_of, plan_reply, scripted, step, thread

started: list[str] = []
CHAIN_END = threading.Event()


@tool
def link(name: str) -> str:
    """A step of the chain; D lets the leaves go."""
    started.append(name)
    if name == "D":
        CHAIN_END.set()
    return name


@tool
def leaf(name: str) -> str:
    """A step nothing depends on: waits (at most 5 s) until the chain has ended."""
    started.append(name)
    CHAIN_END.wait(timeout=5)
    return name


LEAVES_FIRST = plan_of(  # first come, first served would start X1, X2, X3, then the chain
    step(1, "leaf", {"name": "X1"}),
    step(2, "leaf", {"name": "X2"}),
    step(3, "leaf", {"name": "X3"}),
    step(4, "link", {"name": "A"}),
    step(5, "link", {"name": "B"}, [4]),
    step(6, "link", {"name": "C"}, [5]),
    step(7, "link", {"name": "D"}, [6]),
    step(8, "link", {"name": "E"}, [7]),  # ties with the leaves: one step left each
)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_longest_chain_gets_a_slot_first(use_models, ctx, mode):
    started.clear()
    CHAIN_END.clear()
    use_models(planner=scripted(plan_reply(LEAVES_FIRST)))
    graph = build_graph(
        checkpointer=InMemorySaver(), tools=ToolRegistry([leaf, link]), approval="never"
    )
    context = ctx(max_parallel_steps=2, approval="never")
    if mode == "sync":
        out = graph.invoke({"task": "t"}, thread(), context=context)
    else:
        out = asyncio.run(graph.ainvoke({"task": "t"}, thread(), context=context))
    assert out["final"]["status"] == "succeeded", out["final"]
    # X1 took one slot, the chain the other: X2 and X3 start only after the chain's D (which
    # X1's tool may print before or after A: it runs on a worker thread)
    assert [s for s in started if s in {"A", "B", "C", "D"}] == ["A", "B", "C", "D"], started
    assert started.index("D") < min(started.index("X2"), started.index("X3")), started
    assert started.index("X1") < min(started.index("X2"), started.index("X3")), started


def test_declared_latency_weighs_the_chain():
    @tool
    def slow(x: int) -> int:
        """Slow."""
        return x

    @tool
    def fast(x: int) -> int:
        """Fast."""
        return x

    slow.metadata = {TYPICAL_LATENCY: 10.0}
    fast.metadata = {TYPICAL_LATENCY: 1.0}
    steps = [
        step(1, "fast", {"x": 1}),
        step(2, "fast", {"x": 2}, [1]),
        step(3, "fast", {"x": 3}, [2]),
        step(4, "slow", {"x": 4}),
    ]
    ranks = chain_ranks(steps, ToolRegistry([slow, fast]))
    assert min(ranks, key=ranks.__getitem__) == 4  # 10 s beats three 1 s steps
    slow.metadata = fast.metadata = {}
    unweighted = chain_ranks(steps, ToolRegistry([slow, fast]))
    assert min(unweighted, key=unweighted.__getitem__) == 1  # by step count: the chain
