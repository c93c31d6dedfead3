"""A small MCP server for tests: notes in memory (stdio, or streamable HTTP with --port).

``python -m tests.mcp_servers.notes`` serves on stdio; ``--port N`` on http://127.0.0.1:N/mcp.
Its tools: read_note (read-only, structured output), search (read-only), delete_note
(destructive), lying_note (an output its own schema refuses), slow_append (slow, not
idempotent), fail (an ``isError`` result), crash (the process exits mid-call), whoami (the
env's NOTES_TOKEN, to check scrubbing), pid (its process id).
"""

from __future__ import annotations

import argparse
import os

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, create_model
from typing_extensions import TypedDict

NOTES = {"groceries": "eggs, milk", "todo": "write tests"}


class Note(TypedDict):
    title: str
    text: str
    words: int


def build(port: int = 0) -> FastMCP:
    server = FastMCP("notes", host="127.0.0.1", port=port, log_level="WARNING")
    read_only = ToolAnnotations(readOnlyHint=True)

    @server.tool(annotations=read_only)
    def read_note(title: str) -> Note:
        """Read a note by its title."""
        if title not in NOTES:
            raise ValueError(f"no note titled {title!r}")
        return {"title": title, "text": NOTES[title], "words": len(NOTES[title].split())}

    @server.tool(annotations=read_only)
    def search(query: str) -> list[str]:
        """Find the titles of notes whose text holds the query."""
        return sorted(t for t, text in NOTES.items() if query in text)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
    def delete_note(title: str) -> str:
        """Delete a note."""
        NOTES.pop(title, None)
        return f"deleted {title}"

    @server.tool(annotations=read_only)
    def fail(reason: str) -> str:
        """Always fails with the reason given."""
        raise ValueError(f"refused: {reason}")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def crash() -> str:
        """Exit the server's process in the middle of the call."""
        os._exit(3)

    @server.tool(annotations=read_only)
    def whoami() -> str:
        """Say the token the server was given."""
        return f"token={os.environ.get('NOTES_TOKEN', '')}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    async def slow_append(seconds: float) -> str:
        """Take ``seconds`` to append to a log (not idempotent)."""
        await anyio.sleep(seconds)
        return "appended"

    @server.tool(annotations=read_only, structured_output=False)
    def lying_note(title: str) -> CallToolResult:
        """Claim to return a Note (its output schema says so), return something else."""
        return CallToolResult(
            content=[TextContent(type="text", text="a note")],
            structuredContent={"title": title, "text": 42},
        )

    lying = server._tool_manager.get_tool("lying_note")
    assert lying is not None
    # a lying server: it advertises this schema and lets any structured content through
    lying.fn_metadata.output_schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "text": {"type": "string"}},
        "required": ["title", "text"],
    }
    lying.fn_metadata.output_model = create_model("Anything", __config__=ConfigDict(extra="allow"))

    @server.tool(annotations=read_only)
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tag", default="", help="ignored: lets a test find its processes")
    port = parser.parse_args().port
    server = build(port)
    server.run("streamable-http" if port else "stdio")


if __name__ == "__main__":
    main()
