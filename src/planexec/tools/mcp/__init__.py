"""MCP servers as tool sources: stdio and streamable HTTP, with planexec-owned sessions.

::

    from planexec import build_graph
    from planexec.tools.mcp import McpServers

    servers = McpServers.from_file("mcp.json")  # the usual {"mcpServers": {...}} file
    graph = build_graph(tools=servers.registry())  # file and data tools + every server's tools

A server's tools are named ``server__tool``; their hints (read-only, destructive, idempotent)
decide which count as side-effecting at approval and which may be retried after a timeout,
and the operator may override them in the file (see :mod:`planexec.tools.mcp.config` and
docs/guides/mcp.md). Tools made by ``langchain-mcp-adapters`` are read the same way when
registered (:func:`adapt`).
"""

from __future__ import annotations

import os
import threading

from planexec.tools.mcp.adapters import adapt
from planexec.tools.mcp.config import (
    CONFIG_ENV,
    McpConfig,
    PlanexecOptions,
    ServerConfig,
    ToolHints,
    load_mcp_config,
)
from planexec.tools.mcp.servers import McpServers
from planexec.tools.mcp.sessions import ServerGone
from planexec.tools.mcp.tools import mcp_tools
from planexec.tools.registry import ToolRegistry

_shared: dict[str, tuple[McpServers, ToolRegistry]] = {}
_shared_lock = threading.Lock()


def mcp_registry(
    config: str | os.PathLike[str] | McpConfig, base: ToolRegistry | None = None
) -> ToolRegistry:
    """Return ``base`` (default: the file and data tools) with the tools of every server added.

    The sessions stay open for the process (closed at its exit); keep an
    :class:`McpServers` yourself to close them sooner.
    """
    servers = McpServers(config if isinstance(config, McpConfig) else load_mcp_config(config))
    registry: ToolRegistry = servers.registry(base)
    return registry


def shared_servers(path: str | os.PathLike[str]) -> tuple[McpServers, ToolRegistry]:
    """Return the servers of an MCP file and a registry of their tools, one pair per process.

    Every caller naming the same file (the served graph, the CLI) shares its sessions.
    """
    key = os.path.realpath(path)
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            servers = McpServers.from_file(path)
            found = _shared[key] = (servers, servers.registry())
        return found


def registry_from_env() -> ToolRegistry | None:
    """Return the shared registry of ``$PLANEXEC_MCP_CONFIG``'s servers when it is set."""
    path = os.environ.get(CONFIG_ENV, "").strip()
    return shared_servers(path)[1] if path else None


__all__ = [
    "CONFIG_ENV",
    "McpConfig",
    "McpServers",
    "PlanexecOptions",
    "ServerConfig",
    "ServerGone",
    "ToolHints",
    "adapt",
    "load_mcp_config",
    "mcp_registry",
    "mcp_tools",
    "registry_from_env",
    "shared_servers",
]
