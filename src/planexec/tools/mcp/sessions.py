"""planexec's own MCP sessions: opened once, reused by every call, closed by planexec.

planexec's background loop (:mod:`planexec.concurrency.background`) owns every MCP session: a
session is opened on first use (a stdio server's process started, an
HTTP server's handshake made), reused by every call of every step and run of the process,
opened again when its server has gone away, and closed by :meth:`McpServers.close` or at the
interpreter's exit. Calls reach that loop from any thread or loop
(``asyncio.run_coroutine_threadsafe``), so sync ``invoke``, ``ainvoke`` and the LangGraph server
use the sessions alike and none is bound to a caller's loop that may close.

A session whose server exits (or whose connection drops) is noticed at once: a call waiting on
it fails (``MCP server 'x' exited …``) and the next call opens a new session. A call is sent
at most once: a server that went away while it ran may have done it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from datetime import timedelta
from typing import Any, TextIO, TypeVar

from planexec.concurrency import background
from planexec.errors import ToolError, TransientToolError
from planexec.redaction.secrets import scrub_text
from planexec.tools.mcp.config import ServerConfig

T = TypeVar("T")
STDERR_TAIL = 2000
"""Characters of a stdio server's last error output quoted when it exits."""
STDERR_KEPT = 8192
"""Bytes of a stdio server's error output kept (the rest is read and dropped)."""
ABORT_GRACE = 0.5
"""Seconds a session that did not start in time gets to end once cancelled."""
CLOSE_TIMEOUT = 10.0
"""Seconds :meth:`McpServers.close` waits for sessions to close."""

log = logging.getLogger(__name__)


class ServerGone(ToolError):
    """An MCP server exited or dropped its connection while a call waited on it."""


class ErrorTail:
    """A stdio server's error output: a pipe whose last :data:`STDERR_KEPT` bytes are kept.

    A thread reads the pipe as the server writes (so a chatty server never blocks on a full
    pipe) and keeps only its tail, quoted when the server exits: nothing grows without bound.
    The pipe lasts as long as its server's configuration (every session reuses it).
    """

    def __init__(self, server: str) -> None:
        read_end, write_end = os.pipe()
        self.file: TextIO = os.fdopen(write_end, "w", encoding="utf-8", errors="replace")
        self._kept = bytearray()
        self._lock = threading.Lock()
        reader = threading.Thread(
            target=self._read, args=(read_end,), name=f"planexec-mcp-stderr-{server}", daemon=True
        )
        reader.start()

    def _read(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self._kept += chunk
                    del self._kept[:-STDERR_KEPT]
        with contextlib.suppress(OSError):
            os.close(fd)

    def tail(self) -> str:
        """Return the last of what the server wrote to its error output, stripped."""
        with self._lock:
            return self._kept.decode("utf-8", "replace").strip()


class _Session:
    """One open session of one server: the task that owns its transport, and how it ended."""

    def __init__(self) -> None:
        self.client: Any = None  # mcp.ClientSession once open
        self.gone = asyncio.Event()
        self.closing = asyncio.Event()
        self.reason = ""
        self.error: BaseException | None = None
        """What ended the session, when an error did."""
        self.task: asyncio.Task[None] | None = None
        self.opened_at = 0.0


class Server:
    """One configured MCP server and its current session (all on the background loop)."""

    def __init__(self, name: str, config: ServerConfig) -> None:
        self.name, self.config = name, config
        self.timeout = config.planexec.timeout
        self._session: _Session | None = None
        self._lock: asyncio.Lock | None = None
        self._errlog: ErrorTail | None = None
        self.opened = 0
        """How many sessions this server has had opened (1 unless it went away)."""

    def _describe(self) -> str:
        return f"MCP server {self.name!r}"

    async def session(self) -> tuple[Any, _Session]:
        """Return the open session, opening one if there is none or its server went away."""
        current = self._session
        if current is not None and current.client is not None and not current.gone.is_set():
            return current.client, current
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            current = self._session
            if current is not None and current.client is not None and not current.gone.is_set():
                return current.client, current
            if current is not None:
                await self._end(current)
            current = _Session()
            self._session = current
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            current.task = background.unowned(self._own(current, ready))  # lives on
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.timeout)
            except TimeoutError:
                ready.cancel()  # no one waits for how it ends now
                await self._abort(current)
                raise TransientToolError(
                    f"{self._describe()} did not start (connect and initialize) within "
                    f"{self.timeout:g} s" + self._stderr_tail()
                ) from None
            except BaseException:
                await self._end(current)
                raise
            self.opened += 1
            return current.client, current

    async def _own(self, state: _Session, ready: asyncio.Future[None]) -> None:
        """Open the transport and session, hold them until asked to close or the server goes."""
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                forwarded = _Forward(read, state)
                client = await stack.enter_async_context(ClientSession(forwarded.stream, write))
                forwarder = asyncio.ensure_future(forwarded.run())
                stack.callback(forwarder.cancel)
                await client.initialize()
                state.client, state.opened_at = client, time.monotonic()
                if not ready.done():
                    ready.set_result(None)
                closing = asyncio.ensure_future(state.closing.wait())
                gone = asyncio.ensure_future(state.gone.wait())
                await asyncio.wait({closing, gone}, return_when=asyncio.FIRST_COMPLETED)
                closing.cancel()
                gone.cancel()
        except BaseException as exc:  # the session's end, told to its callers
            state.error = first_error(exc)
            if not ready.done():
                ready.set_exception(
                    TransientToolError(
                        f"{self._describe()} could not be started: {error_text(exc)}"
                        + self._stderr_tail()
                    )
                )
            elif not state.reason:
                state.reason = f"failed: {error_text(exc)}"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            state.client = None
            if not state.reason:
                state.reason = "its session was closed"
            state.gone.set()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        config = self.config
        if config.kind == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            assert config.command is not None
            if self._errlog is None:
                self._errlog = ErrorTail(self.name)
            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.env, cwd=config.cwd
            )
            read, write = await stack.enter_async_context(stdio_client(params, self._errlog.file))
            return read, write
        assert config.url is not None
        import httpx

        try:
            from mcp.client.streamable_http import streamable_http_client
        except ImportError:  # mcp before 1.24: the older name, which takes headers itself
            from mcp.client.streamable_http import streamablehttp_client

            opened = await stack.enter_async_context(
                streamablehttp_client(config.url, headers=config.headers)
            )
            return opened[0], opened[1]
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=config.headers, timeout=httpx.Timeout(self.timeout, read=300.0)
            )
        )
        opened = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=http)
        )
        return opened[0], opened[1]

    def _stderr_tail(self) -> str:
        tail = scrub_text(self._errlog.tail()) if self._errlog is not None else ""
        return f"; its last error output: {tail[-STDERR_TAIL:]}" if tail else ""

    async def call(
        self, tool: str, arguments: dict[str, Any], read_timeout: float | None = None
    ) -> Any:
        """Call a tool on the server; return MCP's ``CallToolResult``.

        Raises :class:`ServerGone` if the server exits while the call waits (the call may have
        run: it is not sent again), ``TransientToolError`` if it cannot be started.
        """
        from mcp import types

        client, state = await self.session()
        timeout = timedelta(seconds=read_timeout) if read_timeout else None
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=tool, arguments=arguments)
        )
        # sent as a plain request: the output is checked by planexec (check_output, in linear
        # time), not by the client's own check, whose regexes a hostile schema could stall
        call = asyncio.ensure_future(
            client.send_request(
                types.ClientRequest(request),
                types.CallToolResult,
                request_read_timeout_seconds=timeout,
            )
        )
        gone = asyncio.ensure_future(state.gone.wait())
        try:
            await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            gone.cancel()
        if not call.done():
            call.cancel()
        elif not _connection_closed(call.exception()):
            return call.result()
        with contextlib.suppress(TimeoutError):  # its reason is known once the session ends
            await asyncio.wait_for(asyncio.shield(state.gone.wait()), 2.0)
        reason = state.reason or "closed its connection"
        if _not_sent(state.error):  # the call never reached the server: safe to make again
            raise TransientToolError(f"{self._describe()} {reason}")
        raise ServerGone(f"{self._describe()} {reason} while {tool} ran{self._stderr_tail()}")

    async def list_tools(self) -> list[Any]:
        """Return the server's tools (MCP ``Tool`` objects), every page of them."""
        client, _ = await self.session()
        found: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):
            try:
                page = await asyncio.wait_for(client.list_tools(cursor=cursor), self.timeout)
            except TimeoutError:
                raise TransientToolError(
                    f"{self._describe()} did not list its tools within {self.timeout:g} s"
                ) from None
            found.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                break
        return found

    async def _abort(self, state: _Session) -> None:
        """End a session that is not open yet at once: its server did not answer in time."""
        state.closing.set()
        if state.task is not None and not state.task.done():
            state.task.cancel()
            await asyncio.wait({state.task}, timeout=ABORT_GRACE)

    async def close(self) -> None:
        """Close the session, if one is open (its stdio process ends)."""
        current, self._session = self._session, None
        if current is not None:
            await self._end(current)

    async def _end(self, state: _Session) -> None:
        state.closing.set()
        if state.task is not None and not state.task.done():
            done, _ = await asyncio.wait({state.task}, timeout=CLOSE_TIMEOUT)
            if not done:
                state.task.cancel()
                await asyncio.wait({state.task}, timeout=CLOSE_TIMEOUT)

    def is_open(self) -> bool:
        """Say whether a session is open now."""
        current = self._session
        return current is not None and current.client is not None and not current.gone.is_set()


class _Forward:
    """The session's read stream, passed through: its end says the server went away.

    A JSON-RPC message the client could not read (a lone surrogate, nesting too deep, a
    result of the wrong shape) ends the session: the stream can no longer be trusted, and a
    call whose reply it was would otherwise wait for its time limit. A line that is no
    JSON-RPC at all (a server's stray print) is skipped.
    """

    def __init__(self, source: Any, state: _Session) -> None:
        import anyio

        self.source, self.state = source, state
        self.sink, self.stream = anyio.create_memory_object_stream[Any](0)

    async def run(self) -> None:
        import anyio

        try:
            async with self.sink:
                async for message in self.source:
                    if isinstance(message, Exception):  # a line the client could not read
                        if not _meant_as_message(message):
                            continue  # a stray line (a print to stdout): skipped, as MCP does
                        self.state.reason = (
                            f"sent a message that is not valid MCP ({type(message).__name__}); "
                            "its session was closed"
                        )
                        return  # the calls waiting on it fail now, not at their time limit
                    await self.sink.send(message)
            if not self.state.closing.is_set() and not self.state.reason:
                self.state.reason = "exited (its connection closed)"
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            if not self.state.closing.is_set() and not self.state.reason:
                self.state.reason = "exited (its connection closed)"
        except Exception as exc:
            if not self.state.reason:
                self.state.reason = f"failed: {error_text(exc)}"
        finally:
            if not self.state.closing.is_set():
                self.state.gone.set()


def _meant_as_message(exc: Exception) -> bool:
    """Say whether an unreadable line was meant as a JSON-RPC message (not a stray print)."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return True  # undecodable bytes and the like: the stream itself is broken
    for error in exc.errors(include_url=False):
        given = error.get("input")
        if isinstance(given, str):
            try:
                given = json.loads(given)
            except RecursionError:  # nested too deep to read: was it a message?
                return bool(str(error.get("input")).lstrip().startswith('{"jsonrpc"'))
            except ValueError:
                continue  # not JSON: a print
        if isinstance(given, dict) and "jsonrpc" in given:
            return True
    return False


def _connection_closed(exc: BaseException | None) -> bool:
    """Say whether a call failed because its session's connection closed (MCP's own error)."""
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    return isinstance(exc, McpError) and exc.error.code == CONNECTION_CLOSED


def first_error(exc: BaseException) -> BaseException:
    """Return an exception group's first real error (any other exception as it is)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _not_sent(exc: BaseException | None) -> bool:
    """Say whether a session ended because its server could not be reached at all."""
    import httpx

    return isinstance(exc, httpx.ConnectError | ConnectionRefusedError)


def error_text(exc: BaseException) -> str:
    """Describe a transport's failure: an exception group by its first real error."""
    exc = first_error(exc)
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    text = scrub_text(str(exc).strip())  # an HTTP error quotes the URL, which may hold a key
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
