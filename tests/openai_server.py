"""A local OpenAI-compatible chat completions server (what Ollama, vLLM or llama.cpp provide).

``serve(reply)`` answers every ``POST .../chat/completions`` with the assistant message
``reply(request_body)`` returns, whole or streamed (``"stream": true``, server-sent events,
tool call arguments in pieces; ``refuses_stream(body)`` true: whole all the same, as servers
that cannot stream answer). ``Pace`` makes it as slow as a real model: a delay before the
first token, then a delay per output token (tokens counted with ``count_tokens``).
``serve(Canned(replies))`` answers from canned replies in the scripted model's format, by
matching the request or in order (:class:`Canned`): the same reply file as ``scripted:PATH``.

``behave(body, n)`` (``n``: the request's number, from 0) makes a request misbehave the way real
providers and serving stacks do (:class:`Behaviour`): cut replies with a finish reason or none,
streams that stop, hang or only send keep-alive comments, requests never answered, HTTP errors
with ``Retry-After``, characters split across stream events, repeated tool names, refusals.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planexec.llm.scripted import ScriptedReply
from tests.servers import free_port

Reply = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Behaviour:
    """How one request misbehaves (the default: it does not).

    * ``status``/``error``/``headers``: answer with this HTTP status and OpenAI-style error body
      (``error``: ``{"message", "type", "code"}``) and headers (e.g. ``Retry-After``);
    * ``hang``: accept the request, read it, and never answer (until the server stops);
    * ``cut_after``: stream only this many pieces of the reply, then ``finish_reason`` (None:
      no finish chunk) and, per ``end``: ``"done"`` (``[DONE]``), ``"close"`` (close the
      connection, no ``[DONE]``), ``"hang"`` (send nothing more), ``"keepalive"`` (only
      ``: keep-alive`` comments, every 0.1 s);
    * ``finish_reason``: the finish reason of a reply (cut or whole; default: stop/tool_calls);
    * ``split_unicode``: every non-ASCII character of the reply is sent in its own stream
      events, split: a character outside the BMP as its two UTF-16 halves (``\\ud83d`` then
      ``\\ude00``, as a server in a UTF-16 language writes them), the others as raw UTF-8 whose
      bytes are written to the socket in two parts, cut inside the character, a pause between;
    * ``repeat_name``: every tool-call delta repeats the tool's name (some serving stacks);
    * ``refusal``: the reply is this refusal (OpenAI's ``refusal`` field), content null;
    * ``content``: the reply is this text instead of the tool call (e.g. a ``<think>`` block
      then JSON);
    * ``sse_error``: a 200 stream whose first event is ``{"error": sse_error}`` (vLLM, LiteLLM);
    * ``garbage_after``: after this many pieces, an event that is not JSON, then the end;
    * ``no_choices``: a 200 reply (whole or streamed) with ``"choices": []``;
    * ``finish_twice``: the finish reason on the last delta and again in an empty chunk;
    * ``empty_stream``: a 200 stream of ``[DONE]`` alone.
    """

    status: int = 200
    error: dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    hang: bool = False
    cut_after: int | None = None
    finish_reason: str | None = "default"
    end: str = "done"
    split_unicode: bool = False
    repeat_name: bool = False
    refusal: str | None = None
    content: str | None = None
    sse_error: dict[str, Any] | str | None = None
    garbage_after: int | None = None
    no_choices: bool = False
    finish_twice: bool = False
    empty_stream: bool = False


Behave = Callable[[dict[str, Any], int], Behaviour]


def tool_call_message(
    name: str, args: dict[str, Any], separators: tuple[str, str] | None = None
) -> dict[str, Any]:
    """An assistant message calling tool ``name`` with ``args`` (JSON text, as models send).

    ``separators`` as in :func:`json.dumps`: by default ``", "`` and ``": "``; ``(",", ":")``
    writes the JSON without spaces.
    """
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}
    call["function"]["arguments"] = json.dumps(args, separators=separators, ensure_ascii=False)
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class Canned:
    """A ``reply`` for :func:`serve` that answers from canned replies, as the scripted model does.

    ``Canned(replies)`` takes planexec's scripted-model reply format (a list of
    ``{"content": text, "tool_calls": [{"name": ..., "args": {...}}], "match": regex}``, or a
    file holding that list or ``{"replies": [...]}``; see :mod:`planexec.llm.scripted`), so one
    reply file serves ``scripted:PATH`` offline and this server alike. A request is answered
    by the first reply whose ``match`` is found in its messages' text (each message's content,
    then its tool calls as JSON), as often as it matches; else by the next reply without a
    ``match``, each once. A reply calls at most one tool (the first). A request nothing answers
    gets an empty text reply and is kept in :attr:`unanswered` (its last 300 characters).
    """

    def __init__(self, replies: str | os.PathLike[str] | list[dict[str, Any]]) -> None:
        """Read the replies (a list, or the path of a reply file)."""
        if isinstance(replies, str | os.PathLike):
            data = json.loads(Path(replies).read_text(encoding="utf-8"))
            replies = data["replies"] if isinstance(data, dict) else data
        self.replies = [ScriptedReply.model_validate(r) for r in replies]
        self.unanswered: list[str] = []
        self._cursor = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one request's body with an assistant message."""
        prompt = "\n".join(_message_text(m) for m in body.get("messages", []))
        with self._lock:
            reply = next(
                (r for r in self.replies if r.match and re.search(r.match, prompt, re.DOTALL)),
                None,
            )
            while reply is None and self._cursor < len(self.replies):
                candidate = self.replies[self._cursor]
                self._cursor += 1
                reply = candidate if candidate.match is None else None
            if reply is None:
                self.unanswered.append(prompt[-300:])
                return {"role": "assistant", "content": ""}
        if reply.tool_calls:
            call = reply.tool_calls[0]
            return {**tool_call_message(call["name"], call.get("args", {})), "content": None}
        return {"role": "assistant", "content": reply.content}


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    calls = message.get("tool_calls")
    return (text if content is not None else "") + (json.dumps(calls) if calls else "")


def count_tokens(text: str) -> int:
    """Tokens of ``text``: o200k_base if bpe-openai is installed, else 4 characters a token."""
    pieces = token_pieces(text)
    return len(pieces)


def token_pieces(text: str) -> list[str]:
    """Split ``text`` into its tokens (o200k_base with bpe-openai, else 4-character pieces)."""
    try:
        import bpe_openai
    except ImportError:
        return [text[i : i + 4] for i in range(0, len(text), 4)]
    encoding = bpe_openai.get_encoding("o200k_base")
    pieces, pending = [], b""
    for token in encoding.encode(text):  # a character may span tokens: keep it whole
        pending += encoding.decode_single_token_bytes(token)
        try:
            pieces.append(pending.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        pending = b""
    return pieces


@dataclass(frozen=True)
class Pace:
    """How slow the model is: seconds before the first token, then per output token."""

    first_token: float = 0.0
    per_token: float = 0.0


@dataclass(frozen=True)
class Usage:
    """The token counts every reply reports (counted from the request or reply when None)."""

    prompt_tokens: int | None = 123
    completion_tokens: int | None = 45


def _text_of(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    text = "".join(c["function"]["arguments"] for c in calls)
    return text or message.get("content") or message.get("refusal") or ""


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive connections, as real providers (streams: chunked)

    def setup(self) -> None:
        """Send each write at once (no Nagle: a keep-alive reply's body would wait ~40 ms)."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _whole(
        self, reply: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Answer with one whole JSON body (and extra headers)."""
        data = json.dumps(reply).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        """Write ``data`` as one HTTP/1.1 chunk of a streamed body."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with self.server.lock:
            number = len(self.server.requests)
            self.server.requests.append(
                {"path": self.path, "auth": self.headers.get("authorization"), "at": time.time(),
                 **body}
            )  # fmt: skip
        how = self.server.behave(body, number)
        if how.hang:
            self.close_connection = True
            self.server.stopping.wait()
            return
        if how.status != 200:
            error = {"error": how.error or {"message": "error", "type": None}}
            self._whole(error, how.status, how.headers)
            return
        message = self.server.reply(body)
        if how.content is not None:
            message = {"role": "assistant", "content": how.content}
        if how.refusal is not None:
            message = {"role": "assistant", "content": None, "refusal": how.refusal}
        pieces = token_pieces(_text_of(message))
        if how.split_unicode:
            pieces = _split_unicode(pieces)
        usage = self.server.usage
        completion = usage.completion_tokens
        prompt = usage.prompt_tokens
        if prompt is None:  # count the request's messages, as a real server does
            prompt = count_tokens(json.dumps(body.get("messages"), ensure_ascii=False))
        counts = {
            "prompt_tokens": prompt,
            "completion_tokens": len(pieces) if completion is None else completion,
        }
        counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if how.finish_reason != "default":
            finish = how.finish_reason  # type: ignore[assignment]
        if how.cut_after is not None:
            pieces = pieces[: how.cut_after]
        base = {"id": "cmpl-1", "created": 0, "model": body["model"]}
        pace, started = self.server.pace, time.monotonic()
        if how.no_choices and not body.get("stream"):
            self._whole({**base, "object": "chat.completion", "choices": [], "usage": counts})
            return
        if not body.get("stream") or self.server.refuses_stream(body):
            time.sleep(pace.first_token + pace.per_token * len(pieces))
            if how.cut_after is not None:
                message = _cut_message(message, "".join(pieces))
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._whole({**base, "object": "chat.completion", "choices": [choice], "usage": counts})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            chunk = {**base, "object": "chat.completion.chunk", "choices": [choice], **extra}
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            if how.split_unicode:  # raw UTF-8, written in two parts inside a character
                text = json.dumps(chunk, ensure_ascii=False)  # a lone half: written \\udXXX
                data = f"data: {text}\n\n".encode("utf-8", "backslashreplace")
                wide = next((i for i, b in enumerate(data) if b >= 0x80), len(data) // 2)
                half = wide + 1
                self._chunk(data[:half])
                self.wfile.flush()
                time.sleep(0.002)
                data = data[half:]
            self._chunk(data)
            self.wfile.flush()

        calls = message.get("tool_calls") or []
        head: dict[str, Any] = {"role": "assistant", "content": None if calls else ""}
        if calls:
            call = calls[0]
            head["tool_calls"] = [
                {"index": 0, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}
            ]  # fmt: skip
        if message.get("refusal") is not None:
            head = {"role": "assistant", "content": None, "refusal": ""}
        if how.sse_error is not None or how.empty_stream or how.no_choices:
            if how.sse_error is not None:
                self._chunk(f"data: {json.dumps({'error': how.sse_error})}\n\n".encode())
            if how.no_choices:
                chunk = {**base, "object": "chat.completion.chunk", "choices": []}
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        send(head)
        name = calls[0]["function"]["name"] if calls else None
        for i, piece in enumerate(pieces):
            if how.garbage_after is not None and i == how.garbage_after:
                self._chunk(b"data: {not json\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            due = started + pace.first_token + pace.per_token * (i + 1)
            time.sleep(max(0.0, due - time.monotonic()))
            if calls:
                function: dict[str, Any] = {"arguments": piece}
                if how.repeat_name:
                    function["name"] = name
                send({"tool_calls": [{"index": 0, "function": function}]})
            elif message.get("refusal") is not None:
                send({"refusal": piece})
            else:
                send({"content": piece})
        if how.cut_after is not None and how.end != "done":
            self._end_cut(how.end)
            return
        if finish is not None:
            send({}, finish)
            if how.finish_twice:
                send({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            chunk = {**base, "object": "chat.completion.chunk", "choices": [], "usage": counts}
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _end_cut(self, end: str) -> None:
        """End a cut stream without its end: the body just ends, hang, or keep-alive comments."""
        if end == "close":  # the body ends cleanly, with no finish reason and no [DONE]
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        self.close_connection = True
        while not self.server.stopping.wait(0.1):
            if end == "keepalive":
                try:
                    self._chunk(b": keep-alive\n\n")
                    self.wfile.flush()
                except OSError:  # the client gave up
                    return

    def log_message(self, *args: object) -> None:
        pass


def _split_unicode(pieces: list[str]) -> list[str]:
    """Split the pieces so that every non-ASCII character stands alone, halved where it can be.

    A character outside the BMP becomes its two UTF-16 halves (lone surrogates: ``json.dumps``
    writes them as ``\\ud83d`` and ``\\ude00`` in two events, as servers in UTF-16 languages do).
    """
    out: list[str] = []
    for piece in pieces:
        for part in re.split(r"([^\x00-\x7f])", piece):
            if not part:
                continue
            if len(part) == 1 and ord(part) > 0xFFFF:
                halves = part.encode("utf-16-le", "surrogatepass")
                out += [halves[:2].decode("utf-16-le", "surrogatepass"),
                        halves[2:].decode("utf-16-le", "surrogatepass")]  # fmt: skip
            else:
                out.append(part)
    return out


def _cut_message(message: dict[str, Any], text: str) -> dict[str, Any]:
    """The message as far as ``text`` goes (a whole, not streamed, reply that was cut)."""
    calls = message.get("tool_calls") or []
    if not calls:
        return {**message, "content": text}
    call = {**calls[0], "function": {**calls[0]["function"], "arguments": text}}
    return {**message, "tool_calls": [call]}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops a connection (a cancelled call, a closed pool) is no error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def __init__(
        self,
        reply: Reply,
        pace: Pace,
        usage: Usage,
        refuses_stream: Callable[..., bool],
        behave: Behave,
    ) -> None:
        super().__init__(("127.0.0.1", free_port()), _Handler)
        self.reply, self.pace, self.usage = reply, pace, usage
        self.refuses_stream, self.behave = refuses_stream, behave
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()  # hung requests end when the server stops


@contextmanager
def serve(
    reply: Reply,
    pace: Pace = Pace(),
    usage: Usage = Usage(),
    refuses_stream: Callable[[dict[str, Any]], bool] = lambda body: False,
    behave: Behave = lambda body, n: Behaviour(),
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve on a free loopback port; yield its base URL (``.../v1``) and the requests seen."""
    server = _Server(reply, pace, usage, refuses_stream, behave)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.requests
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
