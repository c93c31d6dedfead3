"""One definition of a transient error; one retry layer for model calls (issue 9, section 4)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
import requests
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.errors import ProviderError, ToolError, TransientToolError, is_transient
from planexec.tools import ToolRegistry
from tests.helpers import plan_of, plan_reply, scripted, step, thread
from tests.servers import free_port

REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def status_error(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
    return cls(f"HTTP {code}", response=httpx.Response(code, request=REQUEST), body=None)


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (TransientToolError("busy"), True),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (openai.APIConnectionError(request=REQUEST), True),
        (openai.APITimeoutError(request=REQUEST), True),
        (status_error(openai.RateLimitError, 429), True),
        (status_error(openai.InternalServerError, 503), True),
        (status_error(openai.APIStatusError, 408), True),
        (status_error(openai.APIStatusError, 409), True),
        (status_error(openai.BadRequestError, 400), False),
        (httpx.ConnectTimeout("slow"), True),
        (httpx.RemoteProtocolError("dropped"), True),
        (httpx.HTTPStatusError("x", request=REQUEST, response=httpx.Response(502)), True),
        (httpx.HTTPStatusError("x", request=REQUEST, response=httpx.Response(404)), False),
        (requests.ConnectionError("refused"), True),
        (requests.ReadTimeout("slow"), True),
        (status_error(openai.AuthenticationError, 401), False),
        (ToolError("bad input"), False),
        (ValueError("bad"), False),
        (KeyError("x"), False),
    ],
)
def test_one_definition_of_transient(exc, transient):
    assert is_transient(exc) is transient


attempts: list[float] = []


@tool
def rate_limited() -> str:
    """Fail like a rate-limited API the first time, then succeed."""
    attempts.append(time.time())
    if len(attempts) == 1:
        raise status_error(openai.RateLimitError, 429)
    return "done"


def test_a_step_hitting_a_rate_limit_is_retried_like_a_model_node(use_models, ctx):
    attempts.clear()
    use_models(planner=scripted(plan_reply(plan_of(step(1, "rate_limited")))))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([rate_limited]))
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["steps"]["1"]["status"] == "succeeded", out["steps"]["1"]
    assert out["steps"]["1"]["attempts"] == 2


@pytest.fixture
def failing_openai_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            hits.append(self.path)
            data = json.dumps({"error": {"message": "overloaded", "type": "server_error"}})
            self.send_response(503)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", hits
    finally:
        server.shutdown()


def test_a_failing_model_endpoint_gets_three_requests_not_nine(
    failing_openai_server, monkeypatch, workspace
):
    url, hits = failing_openai_server
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([rate_limited]))
    ctx = Context(planner_model="openai:down", shared_folder="ws")
    with pytest.raises(ProviderError, match=r"HTTP 503 server_error\): overloaded \(after 3 tries"):
        graph.invoke({"task": "t"}, thread(), context=ctx)
    assert len(hits) == 3  # planexec's model layer: 3 tries; the client and the node do not retry
