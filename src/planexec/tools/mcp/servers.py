"""The MCP servers of one config, as planexec runs them (:class:`McpServers`)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import weakref
from typing import Any

from planexec.concurrency import background
from planexec.errors import ConfigurationError, ToolError, TransientToolError
from planexec.tools.mcp.config import McpConfig
from planexec.tools.mcp.sessions import CLOSE_TIMEOUT, Server, error_text
from planexec.tools.mcp.tools import mcp_tools

_open_servers: weakref.WeakSet[McpServers] = weakref.WeakSet()


class McpServers:
    """The MCP servers of one config, with planexec-owned sessions.

    ::

        servers = McpServers.from_file("mcp.json")
        registry = servers.registry()  # the file and data tools, and every server's tools
        graph = build_graph(tools=registry)
        ...
        servers.close()  # else at the interpreter's exit

    Listing the tools opens each server's session; the sessions stay open for the calls.
    """

    def __init__(self, config: McpConfig) -> None:
        """Keep the config; nothing is started until tools are listed or called."""
        self.config = config
        self.servers = {name: Server(name, c) for name, c in config.mcpServers.items()}
        _open_servers.add(self)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> McpServers:
        """Read an MCP servers file (:func:`~planexec.tools.mcp.config.load_mcp_config`)."""
        from planexec.tools.mcp.config import load_mcp_config

        return cls(load_mcp_config(path))

    def server(self, name: str) -> Server:
        """Return the server of that name (KeyError if none)."""
        return self.servers[name]

    def list_tools(self) -> dict[str, list[Any]]:
        """Open each server's session and list its tools (MCP ``Tool`` objects), by server.

        Raises :class:`~planexec.errors.ConfigurationError` naming a server that cannot be
        reached.
        """
        found: dict[str, list[Any]] = {}
        for name, server in self.servers.items():
            try:
                # the session's start and each page are bounded by the server's timeout
                found[name] = background.wait(server.list_tools(), server.timeout * 3 + 10)
            except Exception as exc:
                detail = (
                    str(exc)
                    if isinstance(exc, ToolError | TransientToolError)
                    else (f"MCP server {name!r}: {error_text(exc)}")
                )
                raise ConfigurationError(f"cannot list the tools: {detail}") from None
        return found

    def tools(self) -> list[Any]:
        """Return every server's tools as LangChain tools (see :mod:`planexec.tools.mcp.tools`)."""
        return mcp_tools(self)

    def registry(self, base: Any = None) -> Any:
        """Return ``base`` (default: the file and data tools) with every server's tools added."""
        from planexec.tools import default_registry

        registry = base if base is not None else default_registry()
        for tool_ in self.tools():  # a name already taken: ToolNameClashError naming both
            registry.register(tool_)
        return registry

    def close(self) -> None:
        """Close every open session (stdio servers' processes end); they reopen if used."""
        if background.pid() != os.getpid():  # another process's sessions (after a fork): not ours
            return

        async def close_all() -> None:
            await asyncio.gather(*(s.close() for s in self.servers.values()))

        with contextlib.suppress(Exception):
            background.wait(close_all(), CLOSE_TIMEOUT * 2)

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@atexit.register
def _close_at_exit() -> None:
    for servers in list(_open_servers):
        servers.close()
