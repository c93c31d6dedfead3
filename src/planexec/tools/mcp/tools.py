"""MCP tools as LangChain tools that call through planexec's sessions.

Each tool of each server becomes a ``StructuredTool`` named ``server__tool``
(:func:`~planexec.tools.mcp.hints.tool_name`) whose argument schema is the server's input
schema as written (the planner sees it whole), whose metadata carries its hints' meaning
(:mod:`planexec.tools.mcp.hints`) and its output schema, and whose call goes through the
server's long-lived session (:mod:`planexec.tools.mcp.sessions`).

A call returns JSON: the result's ``structuredContent`` when there is some, else its text (the
text blocks joined; other blocks described in a line). An ``isError`` result or an MCP
protocol error fails the step with the server's message.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool

from planexec.concurrency import background
from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT
from planexec.errors import ConfigurationError, ToolError, ToolNameClashError, TransientToolError
from planexec.tools.mcp.config import ToolHints
from planexec.tools.mcp.hints import cut, marks, tool_name
from planexec.tools.mcp.sessions import Server, ServerGone
from planexec.tools.registry import origin
from planexec.tools.returns import OUTPUT_SCHEMA, declared_schema

if TYPE_CHECKING:
    from planexec.tools.mcp.servers import McpServers


def mcp_tools(servers: McpServers) -> list[BaseTool]:
    """Return every tool of every server of ``servers`` (their sessions are opened to list them).

    A tool that requires task augmentation is left out, with a warning naming it
    (:func:`requires_task`). Raises :class:`~planexec.errors.ToolNameClashError` if two tools
    would get one name, and :class:`~planexec.errors.ConfigurationError` if an override names a
    tool the server does not have.
    """
    made: dict[str, BaseTool] = {}
    for name, listed in servers.list_tools().items():
        server = servers.server(name)
        options = server.config.planexec
        known = {t.name for t in listed}
        unknown = sorted(set(options.tools) - known - {"*"})
        if unknown:
            raise ConfigurationError(
                f"MCP server {name!r}: planexec.tools names tools it does not have: "
                f"{', '.join(unknown)} (it has: {', '.join(sorted(known)) or 'none'})"
            )
        prefix = name if options.prefix is None else options.prefix
        for item in listed:
            if requires_task(item):
                warnings.warn(
                    f"MCP server {name!r}: tool {item.name!r} requires task augmentation "
                    "(execution.taskSupport 'required'), which planexec does not use: not "
                    "offered to the planner",
                    stacklevel=2,
                )
                continue
            tool_ = make_tool(server, item, prefix, options.tools)
            taken = made.get(tool_.name)
            if taken is not None:
                raise ToolNameClashError(
                    f"tool name {tool_.name!r} is taken: {origin(tool_)} would replace "
                    f"{origin(taken)}. Give one of their servers another planexec.prefix"
                )
            made[tool_.name] = tool_
    return list(made.values())


def requires_task(item: Any) -> bool:
    """Say whether an MCP tool may only be called as a task (``execution.taskSupport``).

    Such a tool refuses a plain ``tools/call`` (-32601); the installed client's task API is
    experimental and deprecated, so planexec does not offer the tool at all.
    """
    execution = getattr(item, "execution", None)
    return getattr(execution, "taskSupport", None) == "required"


def make_tool(
    server: Server, item: Any, prefix: str, overrides: Mapping[str, ToolHints]
) -> BaseTool:
    """Make the LangChain tool of one MCP ``Tool`` of ``server``."""
    annotations = item.annotations.model_dump(exclude_none=True) if item.annotations else None
    metadata = marks(server.name, item.name, annotations, overrides)
    if item.outputSchema:
        try:  # a schema that cannot be checked safely is the server's to fix: left unchecked
            metadata[OUTPUT_SCHEMA] = declared_schema(item.outputSchema, item.name)
        except Exception as exc:  # whatever a server's schema does, the tool stays usable
            warnings.warn(f"MCP server {server.name!r}: output not checked: {exc}", stacklevel=2)
    remote = item.name
    retry = bool(metadata[RETRY_ON_TIMEOUT])

    async def acall(**arguments: Any) -> Any:
        return await background.awaitable(_call(server, remote, arguments, retry))

    def call(**arguments: Any) -> Any:
        return background.wait(_call(server, remote, arguments, retry))

    schema = dict(item.inputSchema or {"type": "object", "properties": {}})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return StructuredTool(
        name=tool_name(prefix, item.name),
        description=_description(item, server.name),
        args_schema=schema,
        func=call,
        coroutine=acall,
        metadata=metadata,
    )


def _description(item: Any, server: str) -> str:
    title = item.annotations.title if item.annotations and item.annotations.title else None
    text = item.description or title or item.name
    return f"{text} (MCP server {server!r}, tool {item.name!r})"


async def _call(server: Server, tool: str, arguments: dict[str, Any], idempotent: bool) -> Any:
    """Call the tool on the background loop; return its JSON result, or raise the step's error."""
    from mcp.shared.exceptions import McpError

    try:
        result = await server.call(tool, arguments)
    except ServerGone as exc:
        if idempotent:  # declared safe to call again: the executor's retry opens a new session
            raise TransientToolError(str(exc)) from None
        raise ToolError(
            f"{exc}; not retried: {tool} is not declared idempotent, and the call may have run"
        ) from None
    except McpError as exc:
        raise ToolError(f"MCP server {server.name!r}: {cut(exc.error.message)}") from None
    except (ToolError, TransientToolError):
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a malformed result, a result its output schema refuses, ...
        raise ToolError(f"MCP server {server.name!r}, tool {tool}: {cut(str(exc))}") from None
    return result_value(result, server.name, tool)


def result_value(result: Any, server: str, tool: str) -> Any:
    """Return a ``CallToolResult`` as the step's output; raise :class:`ToolError` on ``isError``."""
    if result.isError:
        message = _text(result.content) or "the tool reported an error with no message"
        raise ToolError(f"MCP server {server!r}, tool {tool}: {cut(message)}")
    if result.structuredContent is not None:
        return result.structuredContent
    return _text(result.content)


def _text(blocks: Iterable[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mimeType}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            parts.append(f"[resource {block.resource.uri}, {block.resource.mimeType or 'binary'}]")
        else:
            dump = getattr(block, "model_dump", None)
            parts.append(json.dumps(dump(mode="json")) if dump else str(block))
    return "\n".join(parts)
