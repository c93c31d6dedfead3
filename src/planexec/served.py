"""The graph ``langgraph.json`` serves (``planexec.served:graph``), for Studio and the API.

It is :func:`planexec.graph.build_graph` as an operator configures it through the
environment (``$PLANEXEC_APPROVAL``, ``$PLANEXEC_WORKSPACE_ROOT``...), with the tools of the
MCP servers ``$PLANEXEC_MCP_CONFIG`` names. Only the LangGraph server imports this module, so
only it starts those servers: importing :mod:`planexec` or running the CLI starts nothing.
"""

from __future__ import annotations

import os

from planexec.graph import build_graph
from planexec.tools.registry import ToolRegistry


def served_tools() -> ToolRegistry | None:
    """Return the served graph's tools: with ``$PLANEXEC_MCP_CONFIG``, its MCP servers' too.

    None (the default tools) when it is not set. The servers' sessions open here, to list
    their tools, and stay open for the process (:mod:`planexec.tools.mcp`).
    """
    if not os.environ.get("PLANEXEC_MCP_CONFIG", "").strip():
        return None
    from planexec.tools.mcp import registry_from_env

    return registry_from_env()


graph = build_graph(tools=served_tools())
