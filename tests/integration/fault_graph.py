"""A planexec graph for ``langgraph dev`` whose tools misbehave (see test_tool_faults)."""

from __future__ import annotations

import time

from langchain_core.tools import tool

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import async_sleep_for


@tool
async def blocks_loop(seconds: float) -> dict[str, float]:
    """An async tool that never awaits: it holds its event loop for `seconds` (a CPU loop)."""
    start = time.time()
    while time.time() < start + seconds:
        pass
    return {"start": start, "end": time.time()}


graph = build_graph(tools=ToolRegistry([blocks_loop, async_sleep_for]))
