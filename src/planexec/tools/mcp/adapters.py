"""Tools made by ``langchain-mcp-adapters``, made fit for planexec when registered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from planexec.errors import ToolError
from planexec.tools.mcp.config import ToolHints
from planexec.tools.mcp.hints import (
    ADAPTERS,
    HINT_FIELDS,
    MCP_KEY,
    OPEN_WORLD,
    SIDE_EFFECTS,
    cut,
    marks,
)


def from_adapters(tool_: BaseTool) -> bool:
    """Say whether a tool was made by ``langchain-mcp-adapters`` (and not yet adapted)."""
    coroutine = getattr(tool_, "coroutine", None)
    return (
        tool_.response_format == "content_and_artifact"
        and getattr(coroutine, "__module__", "") == "langchain_mcp_adapters.tools"
    )


def adapters_server(tool_: BaseTool) -> str | None:
    """Return the server a tool of ``langchain-mcp-adapters`` calls, as its client names it.

    The adapters keep it only in the call's closure (``server_name``); a tool converted
    without one, or by a version that keeps it elsewhere, gives None.
    """
    coroutine = getattr(tool_, "coroutine", None)
    code, cells = getattr(coroutine, "__code__", None), getattr(coroutine, "__closure__", None)
    if code is None or not cells:
        return None
    for name, cell in zip(code.co_freevars, cells, strict=False):
        if name == "server_name":
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                return None
            return value if isinstance(value, str) and value else None
    return None


def adapt(
    tool_: BaseTool, *, server: str | None = None, overrides: Mapping[str, ToolHints] | None = None
) -> BaseTool:
    """Make a tool of ``langchain-mcp-adapters`` fit planexec: hints read, errors raised.

    The adapters' tools return MCP content blocks and (by default) return an ``isError``
    result as if it were output: the copy returns the structured content or the text, fails
    the step on an error, and carries the side-effect and retry marks its annotations mean.
    Its sessions stay the adapters' (a tool of ``MultiServerMCPClient.get_tools()`` opens one
    per call): :class:`~planexec.tools.mcp.sessions.McpServers` keeps them open instead.
    """
    if tool_.response_format != "content_and_artifact" or not isinstance(tool_, StructuredTool):
        return tool_
    original = tool_.coroutine
    if original is None:
        return tool_
    metadata = dict(tool_.metadata or {})
    annotations = {k: v for k, v in metadata.items() if k in HINT_FIELDS.values()}
    label = server or adapters_server(tool_) or "mcp"
    new_marks = marks(label, tool_.name, annotations or None, overrides or {})
    new_marks[MCP_KEY]["via"] = ADAPTERS
    # the operator's own marks on the tool (its metadata) win over the server's hints
    own = {k: metadata[k] for k in (SIDE_EFFECTS, OPEN_WORLD) if isinstance(metadata.get(k), bool)}
    name = tool_.name

    async def acall(**arguments: Any) -> Any:
        try:
            content, artifact = await original(**arguments)
        except Exception as exc:  # the adapters raise ToolException on isError when asked to
            raise ToolError(f"MCP tool {name}: {cut(str(exc))}") from None
        if isinstance(artifact, dict) and artifact.get("structured_content") is not None:
            return artifact["structured_content"]
        blocks = content if isinstance(content, list) else [content]
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in blocks)

    adapted = tool_.model_copy(
        update={
            "coroutine": acall,
            "response_format": "content",
            "handle_tool_error": False,
            "metadata": {**metadata, **new_marks, **own},
        }
    )
    return adapted
