"""The graph ``langgraph.json`` serves (``planexec.served:graph``), for Studio and the API.

It is :func:`planexec.graph.build_graph` as an operator configures it through the
environment (``$PLANEXEC_APPROVAL``, ``$PLANEXEC_WORKSPACE``, ``$PLANEXEC_WORKSPACE_ROOT``...),
with the tools of the MCP servers ``$PLANEXEC_MCP_CONFIG`` names. Only the LangGraph server
imports this module, so only it starts those servers: importing :mod:`planexec` or running the
CLI starts nothing.

``graph`` is a graph factory (:func:`planexec.admission.serving`: the LangGraph server calls
it for each request): it returns the one compiled graph, after checking a run's context as
the client sent it, since the server itself drops the keys the context schema does not name.
"""

from __future__ import annotations

import os

from planexec.admission import PlanexecGraph, serving
from planexec.graph import build_graph
from planexec.tools.registry import ToolRegistry

WORKSPACE_ENV = "PLANEXEC_WORKSPACE"
"""The one folder every run of the served graph works in (else a folder per thread)."""


def served_tools() -> ToolRegistry | None:
    """Return the served graph's tools: with ``$PLANEXEC_MCP_CONFIG``, its MCP servers' too.

    None (the default tools) when it is not set. The servers' sessions open here, to list
    their tools, and stay open for the process (:mod:`planexec.tools.mcp`).
    """
    if not os.environ.get("PLANEXEC_MCP_CONFIG", "").strip():
        return None
    from planexec.tools.mcp import registry_from_env

    return registry_from_env()


def _served_graph() -> PlanexecGraph:
    workspace = os.environ.get(WORKSPACE_ENV, "").strip() or None
    return build_graph(tools=served_tools(), workspace=workspace)


graph = serving(_served_graph())
