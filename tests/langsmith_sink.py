"""A loopback LangSmith endpoint for tests: it takes what the real ``langsmith`` client sends.

``serve_langsmith(received)`` serves on a free loopback port and yields its URL; every request
is decoded (zstd, gzip, by its ``content-encoding``) and sorted into ``received``
(:class:`Received`): runs, put together run by run (a run's post and patch, and their
``inputs``/``outputs``/``extra``/``error`` parts, from multipart ingest, ``/runs/batch`` or
``/runs``), and feedback (multipart ``feedback.<id>`` parts, or ``POST /feedback`` bodies).
``GET /info`` answers as LangSmith does (:data:`INFO`: zstd-compressed multipart ingest) or as
told (:data:`OLD_INFO`: a server that says nothing of itself), after a delay if asked.

``run_traced(script, *args, endpoint=url)`` runs a Python script in a fresh process with
LangSmith tracing on against that endpoint; ``sent_to_langsmith`` does both and returns every
body the endpoint got.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from tests.servers import ROOT, free_port

LangSmithRun = dict[str, Any]
"""A run as LangSmith got it: its post and patch merged (fields that are not None)."""
Feedback = dict[str, Any]
"""One piece of feedback as LangSmith got it."""

INFO: dict[str, Any] = {
    "version": "0.12.33",
    "instance_flags": {"zstd_compression_enabled": True},
    "batch_ingest_config": {
        "use_multipart_endpoint": True,
        "size_limit_bytes": 20_971_520,
        "size_limit": 100,
        "scale_up_nthreads_limit": 16,
        "scale_up_qsize_trigger": 1000,
        "scale_down_nempty_trigger": 4,
    },
}
"""What LangSmith's ``/info`` says: runs and feedback go in zstd-compressed multipart batches."""
OLD_INFO: dict[str, Any] = {}
"""A server that says nothing of itself: feedback goes as ``POST /feedback``."""
TRACING_OFF = {"LANGSMITH_TRACING": "", "LANGCHAIN_TRACING_V2": "", "LANGCHAIN_TRACING": ""}
"""Environment variables that leave tracing off (a key and an endpoint alone do not turn it on)."""
API_KEY = "lsv2-fake-key-123"
"""The LangSmith API key a traced script is given."""


@dataclass
class Received:
    """What the endpoint got: runs put together from their parts and feedback, decoded; every
    body (decoded) and every request's path, in the order they came."""

    runs: dict[str, LangSmithRun] = field(default_factory=dict)
    feedback: list[Feedback] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def add(self, run_id: str, key: str | None, value: Any) -> None:
        """Merge one part into its run: the run's fields (``key`` None) or one of its parts."""
        run = self.runs.setdefault(run_id, {"id": run_id})
        if key is None:
            run.update({k: v for k, v in value.items() if v is not None})
        elif value is not None:
            run[key] = value

    def named(self, name: str) -> list[LangSmithRun]:
        """The runs of this name."""
        return [r for r in self.runs.values() if r.get("name") == name]

    def run(self, run_id: str) -> LangSmithRun:
        """The run of this id (it must have been sent)."""
        assert run_id in self.runs, f"no run {run_id} was sent"
        return self.runs[run_id]

    def feedback_keyed(self, key: str) -> list[Feedback]:
        """The feedback of this key, in the order it came."""
        return [f for f in self.feedback if f.get("key") == key]


def decoded(headers: email.message.Message, body: bytes) -> bytes:
    """The body as sent before compression (zstd or gzip, by its content-encoding)."""
    encoding = (headers.get("content-encoding") or "").lower()
    if encoding == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(body).read()
    if encoding == "gzip":
        return gzip.decompress(body)
    assert encoding in ("", "identity"), encoding
    return body


def take(received: Received, path: str, headers: email.message.Message, body: bytes) -> None:
    """Sort one request's decoded body into runs and feedback: multipart parts (``post.<id>``,
    ``patch.<id>``, their ``.<key>`` parts, ``feedback.<id>``), a batch, one run, feedback."""
    kind = headers.get("content-type") or ""
    received.bodies.append(body)
    received.paths.append(path)
    if kind.startswith("multipart/"):
        _take_parts(received, kind, body)
        return
    if not body:
        return
    data = json.loads(body)
    if path.startswith("/feedback"):
        received.feedback.append(data)
    elif path.startswith("/runs/batch"):
        for run in [*data.get("post", []), *data.get("patch", [])]:
            received.add(str(run.get("id")), None, run)
    elif path.startswith("/runs"):  # POST /runs, or PATCH /runs/<id> (the id in the path)
        received.add(str(data.get("id") or path.rstrip("/").rsplit("/", 1)[-1]), None, data)


def _take_parts(received: Received, kind: str, body: bytes) -> None:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + kind.encode() + b"\r\n\r\n" + body
    )
    assert isinstance(message, email.message.EmailMessage)
    for part in message.iter_parts():
        name = str(part.get_param("name", header="content-disposition"))
        op, _, rest = name.partition(".")
        if op not in ("feedback", "post", "patch"):
            continue  # e.g. a run's attachments
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes), name
        data = json.loads(payload)
        if op == "feedback":
            received.feedback.append(data)
        else:
            run_id, _, key = rest.partition(".")
            received.add(run_id, key or None, data)


@contextmanager
def serve_langsmith(
    received: Received,
    *,
    info: Mapping[str, Any] = INFO,
    info_delay: float = 0,
    sessions: list[dict[str, Any]] | None = None,
    answers: Mapping[tuple[str, str], Any] | None = None,
) -> Iterator[str]:
    """Serve a LangSmith endpoint on a free loopback port that fills ``received``; yield its URL.

    ``info``: what ``GET /info`` answers, after ``info_delay`` seconds; ``sessions``: what
    ``GET /sessions`` answers (the projects), if anything; ``answers``: what other requests
    answer, by method and path prefix (a callable is given the request's JSON body); every other
    request gets ``{}``.
    """
    lock = threading.Lock()

    class Sink(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path.startswith("/info"):
                time.sleep(info_delay)
            with lock:
                take(received, self.path, self.headers, decoded(self.headers, body))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            answer: Any = {}
            given = [
                value for (method, prefix), value in (answers or {}).items()
                if method == self.command and self.path.startswith(prefix)
            ]  # fmt: skip
            if self.path.startswith("/info"):
                answer = info
            elif self.path.startswith("/sessions") and sessions is not None:
                answer = sessions
            elif given:
                sent = decoded(self.headers, body)
                answer = given[0](json.loads(sent or b"{}")) if callable(given[0]) else given[0]
            self.wfile.write(json.dumps(answer).encode())

        do_POST = do_PATCH = do_GET = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def down_endpoint() -> str:
    """The URL of a LangSmith endpoint nobody listens on."""
    return f"http://127.0.0.1:{free_port()}"


def run_traced(
    script: str, *args: str, endpoint: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (``python -c``, with ``args``) with LangSmith tracing on against
    ``endpoint``; ``env`` adds to or overrides its environment. It must exit 0."""
    full_env = {
        **os.environ,
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_API_KEY": API_KEY,
        "LANGSMITH_ENDPOINT": endpoint,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        **(env or {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=full_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def sent_to_langsmith(script: str, tmp_path: Path, env: Mapping[str, str] | None = None) -> bytes:
    """Run ``script`` (its one argument: ``tmp_path``) with LangSmith tracing on against an
    endpoint that says nothing of itself (:data:`OLD_INFO`); return every body it got."""
    received = Received()
    with serve_langsmith(received, info=OLD_INFO) as url:
        run_traced(script, str(tmp_path), endpoint=url, env=env)
    return b"".join(received.bodies)
