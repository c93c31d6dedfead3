"""A local OpenAI-compatible chat completions server (what Ollama, vLLM or llama.cpp provide).

``serve(reply)`` answers every ``POST .../chat/completions`` with the assistant message
``reply(request_body)`` returns, whole or streamed (``"stream": true``, server-sent events,
tool call arguments in pieces; ``refuses_stream(body)`` true: whole all the same, as servers
that cannot stream answer). ``Pace`` makes it as slow as a real model: a delay before the
first token, then a delay per output token (tokens counted with ``count_tokens``).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.servers import free_port

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def tool_call_message(
    name: str, args: dict[str, Any], separators: tuple[str, str] | None = None
) -> dict[str, Any]:
    """An assistant message calling tool ``name`` with ``args`` (JSON text, as models send).

    ``separators`` as in :func:`json.dumps`: by default ``", "`` and ``": "``; ``(",", ":")``
    writes the JSON without spaces.
    """
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}
    call["function"]["arguments"] = json.dumps(args, separators=separators)
    return {"role": "assistant", "content": None, "tool_calls": [call]}


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
    return [encoding.decode([t]) for t in encoding.encode(text)]


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
    return "".join(c["function"]["arguments"] for c in calls) or (message.get("content") or "")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append(
            {"path": self.path, "auth": self.headers.get("authorization"), **body}
        )
        message = self.server.reply(body)
        pieces = token_pieces(_text_of(message))
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
        base = {"id": "cmpl-1", "created": 0, "model": body["model"]}
        pace, started = self.server.pace, time.monotonic()
        if not body.get("stream") or self.server.refuses_stream(body):
            time.sleep(pace.first_token + pace.per_token * len(pieces))
            choice = {"index": 0, "message": message, "finish_reason": finish}
            reply = {**base, "object": "chat.completion", "choices": [choice], "usage": counts}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()

        def send(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            chunk = {**base, "object": "chat.completion.chunk", "choices": [choice], **extra}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        calls = message.get("tool_calls") or []
        head: dict[str, Any] = {"role": "assistant", "content": None if calls else ""}
        if calls:
            call = calls[0]
            head["tool_calls"] = [
                {"index": 0, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}
            ]  # fmt: skip
        send(head)
        for i, piece in enumerate(pieces):
            due = started + pace.first_token + pace.per_token * (i + 1)
            time.sleep(max(0.0, due - time.monotonic()))
            if calls:
                send({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            else:
                send({"content": piece})
        send({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            chunk = {**base, "object": "chat.completion.chunk", "choices": [], "usage": counts}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, reply: Reply, pace: Pace, usage: Usage, refuses_stream: Callable[..., bool]
    ) -> None:
        super().__init__(("127.0.0.1", free_port()), _Handler)
        self.reply, self.pace, self.usage = reply, pace, usage
        self.refuses_stream = refuses_stream
        self.requests: list[dict[str, Any]] = []


@contextmanager
def serve(
    reply: Reply,
    pace: Pace = Pace(),
    usage: Usage = Usage(),
    refuses_stream: Callable[[dict[str, Any]], bool] = lambda body: False,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve on a free loopback port; yield its base URL (``.../v1``) and the requests seen."""
    server = _Server(reply, pace, usage, refuses_stream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.requests
    finally:
        server.shutdown()
        server.server_close()
