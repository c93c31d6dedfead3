"""Tracing: runs are named per node and per step and tagged with the thread; off by default."""

from __future__ import annotations

from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step


class Recorder(BaseTracer):
    """Keeps every finished run, as a LangSmith tracer would send it."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _end_trace(self, run: Run) -> None:
        super()._end_trace(run)

    def _on_run_update(self, run: Run) -> None:
        self.runs.append(run)


def test_runs_are_named_per_node_and_step_and_tagged_with_the_thread(use_models, ctx):
    use_models(
        planner=scripted(
            plan_reply(
                plan_of(step(1, "echo", {"text": "a"}), step(2, "echo", {"text": "$1"}, [1]))
            )
        )
    )
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    recorder = Recorder()
    config = {"configurable": {"thread_id": "traced-thread"}, "callbacks": [recorder]}
    graph.invoke({"task": "t"}, config, context=ctx())
    graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    names = {run.name for run in recorder.runs}
    assert {"planner", "approval", "executor", "evaluator", "finalizer"} <= names
    steps = [run for run in recorder.runs if run.name.startswith("step ")]
    assert {run.name for run in steps} == {"step 1: echo", "step 2: echo"}
    for run in steps:
        assert "planexec:thread:traced-thread" in (run.tags or [])
        assert run.extra["metadata"]["thread_id"] == "traced-thread"


def test_tracing_is_off_unless_asked():
    from langsmith.utils import tracing_is_enabled

    assert not tracing_is_enabled()


TRACED_RUN = """
import json, sys
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from planexec import Context, build_graph, models
from planexec.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, step
plan = plan_of(step(1, "echo", {"text": "a"}))
models.load_chat_model = lambda spec: ScriptedChatModel(
    replies=[ScriptedReply(tool_calls=[{"name": "Plan", "args": plan}])])
graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
ctx = Context(workspace=sys.argv[1], planner_model="scripted")
config = {"configurable": {"thread_id": "langsmith-thread"}}
graph.invoke({"task": "t"}, config, context=ctx)
graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
wait_for_all_tracers()
"""


def test_langsmith_tracing_sends_named_runs_when_enabled(tmp_path):
    import http.server
    import os
    import subprocess
    import sys
    import threading

    from tests.helpers import ROOT
    from tests.servers import free_port

    received: list[bytes] = []

    class Sink(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            received.append(self.rfile.read(length) if length else b"")
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        do_POST = do_PATCH = do_GET = _answer

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {
            **os.environ,
            "LANGSMITH_TRACING": "true",
            "LANGSMITH_API_KEY": "lsv2-fake-key-123",
            "LANGSMITH_ENDPOINT": f"http://127.0.0.1:{port}",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),  # this checkout
        }
        done = subprocess.run(
            [sys.executable, "-c", TRACED_RUN, str(tmp_path)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
    sent = b"".join(received)
    for name in (b"planner", b"executor", b"step 1: echo", b"planexec:thread:langsmith-thread"):
        assert name in sent, name
