"""A second MCP server for tests, sharing a tool name with notes (``search``).

Its tools: search (read-only, open world), publish (no annotations at all: side-effecting),
bump (idempotent counter setter, not read-only). ``--port N`` serves streamable HTTP.
"""

from __future__ import annotations

import argparse

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

PAGES = {"eggs": "https://example.test/eggs", "milk": "https://example.test/milk"}
PUBLISHED: list[str] = []


def build(port: int = 0) -> FastMCP:
    server = FastMCP("web", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=True))
    def search(query: str) -> str:
        """Search the web (a fixed table) for a word."""
        return PAGES.get(query, "nothing found")

    @server.tool()
    def publish(text: str) -> str:
        """Publish a text for everyone to see."""
        PUBLISHED.append(text)
        return f"published {len(text)} characters"

    @server.tool(
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True)
    )
    def set_flag(name: str, value: bool) -> str:
        """Set a flag."""
        return f"{name}={value}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    build(port).run("streamable-http" if port else "stdio")


if __name__ == "__main__":
    main()
