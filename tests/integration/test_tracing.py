"""Tracing: runs are named per node and per step and tagged with the thread; off by default."""

from __future__ import annotations

from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step
from tests.langsmith_sink import TRACING_OFF, sent_to_langsmith


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
        assert not any(t.startswith("planexec:thread:") for t in run.tags or [])
        assert run.extra["metadata"]["thread_id"] == "traced-thread"


TRACED_RUN = """
import json, sys
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from planexec import Context, build_graph
from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, step
plan = plan_of(step(1, "echo", {"text": "a"}))
models.provider_model = lambda spec, *_: ScriptedChatModel(
    replies=[ScriptedReply(tool_calls=[{"name": "Plan", "args": plan}])])
graph = build_graph(
    checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), workspace_root=sys.argv[1]
)
ctx = Context(planner_model="scripted")
config = {"configurable": {"thread_id": "langsmith-thread"}}
graph.invoke({"task": "t"}, config, context=ctx)
graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
wait_for_all_tracers()
"""


def test_tracing_is_off_unless_asked(tmp_path):
    # a LangSmith key and endpoint in the environment are not a request to trace
    assert sent_to_langsmith(TRACED_RUN, tmp_path, env=TRACING_OFF) == b""


def test_langsmith_tracing_sends_named_runs_when_enabled(tmp_path):
    sent = sent_to_langsmith(TRACED_RUN, tmp_path)
    for name in (b"planner", b"executor", b"step 1: echo", b"langsmith-thread"):
        assert name in sent, name


def test_the_tracer_sees_no_secret(hostile, workspace):
    from tests import leaky

    graph = build_graph(checkpointer=InMemorySaver(), tools=leaky.registry())
    recorder = Recorder()
    config = {"configurable": {"thread_id": "traced-secrets"}, "callbacks": [recorder]}
    graph.invoke({"task": "t"}, config, context=hostile)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=hostile)
    assert out["final"]["status"] == "partial"
    names = {run.name for run in recorder.runs}
    assert {"step 1: leak", "step 5: executor model", "step 8: echo"} <= names
    assert any(run.run_type == "llm" for run in recorder.runs)
    for run in recorder.runs:
        seen = [run.inputs, run.outputs, run.error, run.serialized, run.extra, run.events]
        assert leaky.leaks(seen) == [], (run.name, run.run_type, leaky.leaks(seen))


HOSTILE_TRACED_RUN = """
import sys
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from planexec import Context, build_graph
from planexec.llm import models
from tests import leaky
scripted = {"planner": leaky.planner(), "executor": leaky.executor(), "evaluator": leaky.judge()}
models.provider_model = lambda spec, *_: scripted[spec]
graph = build_graph(
    checkpointer=InMemorySaver(), tools=leaky.registry(), workspace_root=sys.argv[1]
)
ctx = Context(shared_folder="ws", planner_model="planner", executor_model="executor",
              evaluator_model="evaluator", llm_judge=True, max_replans=0,
              inline_output_limit=1024, step_max_attempts=2, retry_initial_interval=0.01)
config = {"configurable": {"thread_id": "langsmith-secrets"}}
graph.invoke({"task": "t"}, config, context=ctx)
out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
assert out["final"]["status"] == "partial", out["final"]
wait_for_all_tracers()
"""


def test_langsmith_receives_no_secret(tmp_path):
    from tests import leaky

    sent = sent_to_langsmith(HOSTILE_TRACED_RUN, tmp_path, env=leaky.ENV)
    for name in (b"step 1: leak", b"step 5: executor model", b"langsmith-secrets"):
        assert name in sent, name
    for secret in leaky.SECRETS:
        assert secret.encode() not in sent, secret
