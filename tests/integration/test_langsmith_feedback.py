"""Review decisions become LangSmith feedback on the run's trace, through the real client.

Each run is a subprocess with LangSmith tracing on, against a loopback endpoint that answers
``/info`` as LangSmith does (zstd-compressed multipart ingest: feedback travels as a
``feedback.<id>`` part), or as an older server (feedback is ``POST /feedback``). What arrives is
decoded (zstd, gzip), split into its runs and feedback (:mod:`tests.langsmith_sink`), and checked
field by field.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import leaky
from tests.langsmith_sink import (
    INFO,
    OLD_INFO,
    TRACING_OFF,
    Received,
    down_endpoint,
    run_traced,
    serve_langsmith,
)

SMITHDB_INFO = {
    **INFO,
    "instance_flags": {
        "zstd_compression_enabled": True,
        "ch_query_enabled": False,
        "sdb_query_enabled": True,
    },
}
"""A deployment that finds a run only within its project: feedback needs the project's id."""
PROJECT = {
    "id": "5d1f0d3e-52a4-4c8e-9a49-0c3e2a6f7b10",
    "name": "default",
    "start_time": "2026-11-26T00:00:00+00:00",
    "tenant_id": "0f6ad8d2-9e1c-4b0e-8d64-3f3f1a2b4c5d",
    "reference_dataset_id": None,
}
"""The project the loopback endpoint says the runs went to (``GET /sessions``)."""

RUN = """
import asyncio, json, sys
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from planexec import Context, build_graph
from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, step
from tests.leaky import SECRET, TOKEN

scenario, mode, root = sys.argv[1], sys.argv[2], sys.argv[3]
plan = plan_of(step(1, "echo", {"text": "a"}))
revised = plan_of(step(1, "echo", {"text": "b"}))
failing = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})
edited = {"goal": "g", "steps": plan_of(step(1, "echo", {"text": "edited"}))["steps"]}
scenarios = {
    "approve": ([plan], [{"action": "nonsense"}, {"action": "approve", "by": "alice"}]),
    "edit": ([plan], [{"action": "edit", "plan": edited, "by": "alice"}]),
    "reject_cancel": ([plan, revised], [
        {"action": "reject", "feedback": f"shorter, and not {SECRET}", "by": f"bob {TOKEN}"},
        {"action": "cancel", "reason": f"not with {TOKEN}", "by": "carol"},
    ]),
    "policy": ([plan], []),
    "failure": ([failing], [
        {"action": "approve", "by": "alice"},
        {"action": "skip", "step": 9},
        {"action": "cancel", "step": 1, "reason": f"enough of {SECRET}", "by": "dave"},
    ]),
}
replies, answers = scenarios[scenario]
models.provider_model = lambda spec, *_: ScriptedChatModel(replies=[plan_reply(p) for p in replies])
policy = "never" if scenario == "policy" else "first"
graph = build_graph(
    checkpointer=InMemorySaver(), tools=ToolRegistry([echo, always_fails]),
    workspace_root=root, approval=policy,
)
ctx = Context(planner_model="scripted", approval=policy, max_replans=0,
              retry_initial_interval=0.0)
config = {"configurable": {"thread_id": f"feedback-{scenario}-{mode}"}}


async def arun():
    out = await graph.ainvoke({"task": "t"}, config, context=ctx)
    for answer in answers:
        out = await graph.ainvoke(Command(resume=answer), config, context=ctx)
    return out


def run():
    out = graph.invoke({"task": "t"}, config, context=ctx)
    for answer in answers:
        out = graph.invoke(Command(resume=answer), config, context=ctx)
    return out


if mode == "slow":  # a slow endpoint: how long each decision's node took, then no waiting
    import os, time
    from langchain_core.callbacks import BaseCallbackHandler

    class Timed(BaseCallbackHandler):
        started, took = {}, []

        def on_chain_start(self, serialized, inputs, *, run_id, **kw):
            if kw.get("name") in ("approval", "failure_review"):
                self.started[run_id] = time.monotonic()

        def on_chain_end(self, outputs, *, run_id, **kw):
            if run_id in self.started:
                self.took.append(time.monotonic() - self.started.pop(run_id))

        on_chain_error = on_chain_end

    config["callbacks"] = [Timed()]
    out = run()
    print(json.dumps([{"action": "took", "seconds": t} for t in Timed.took]), flush=True)
    os._exit(0)  # langsmith's drain at exit would wait for the endpoint


if mode == "quiet":  # tracing turned off around the graph, as an evaluation does
    from langsmith import tracing_context

    with tracing_context(enabled=False):
        out = run()
else:
    out = asyncio.run(arun()) if mode == "async" else run()
assert "__interrupt__" not in out, out["__interrupt__"]
wait_for_all_tracers()
print(json.dumps(out["decisions"]))
"""


@dataclass
class Got(Received):
    """What the endpoint got, and the decisions the run's thread recorded (its last line)."""

    decisions: list[dict[str, Any]] = field(default_factory=list)


def traced(
    scenario: str,
    mode: str,
    tmp_path: Path,
    *,
    info: dict[str, Any] = INFO,
    tracing: bool = True,
    down: bool = False,
    info_delay: float = 0,
) -> Got:
    """Run a scenario with LangSmith tracing on (or off) against a loopback endpoint.

    ``down``: the endpoint is a port nobody listens on; ``info_delay``: seconds ``/info``
    takes to answer.
    """
    got = Got()
    env = {**leaky.ENV, **TRACING_OFF, **({"LANGSMITH_TRACING": "true"} if tracing else {})}
    with serve_langsmith(got, info=info, info_delay=info_delay, sessions=[PROJECT]) as url:
        endpoint = down_endpoint() if down else url
        done = run_traced(RUN, scenario, mode, str(tmp_path), endpoint=endpoint, env=env)
        if not down and not info_delay:
            assert "Warning" not in done.stderr, done.stderr  # LangSmith's among them
    got.decisions = json.loads(done.stdout.strip().splitlines()[-1])
    return got


def on_root_of_a_sent_trace(got: Got, feedback: dict[str, Any], node: str) -> None:
    """The feedback is on a root run that was sent, in whose trace ``node`` ran."""
    trace = feedback["trace_id"]
    assert feedback["run_id"] == trace
    root = got.run(trace)
    assert root.get("parent_run_id") is None and root["name"] == "planexec"
    nodes = [r for r in got.runs.values() if r.get("name") == node and r.get("trace_id") == trace]
    assert nodes, f"no {node} run in the feedback's trace"
    assert feedback["extra"]["node_run_id"] in {r["id"] for r in nodes}


def decided(got: Got, action: str) -> dict[str, Any]:
    [decision] = [d for d in got.decisions if d["action"] == action]
    return decision


def assert_about(feedback: dict[str, Any], decision: dict[str, Any], thread: str) -> None:
    """The feedback names the plan version and digest, the thread and who decided."""
    extra = feedback["extra"]
    assert extra["version"] == decision["version"]
    assert extra["digest"] == decision["digest"]
    assert extra["thread_id"] == thread
    assert extra["action"] == decision["action"]
    assert extra["by"] == decision["by"]
    assert extra["at"] == decision["at"]


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_an_approval_is_feedback_on_the_trace_once_and_a_refusal_is_none(tmp_path, mode):
    got = traced("approve", mode, tmp_path)
    # the refused answer before it sent nothing
    [feedback] = got.feedback_keyed("planexec.approval")
    assert (feedback["score"], feedback["value"]) == (1, "approve")
    assert feedback.get("comment") is None
    assert_about(feedback, decided(got, "approve"), f"feedback-approve-{mode}")
    assert feedback["extra"]["by"] == {"id": "alice", "source": "python"}
    on_root_of_a_sent_trace(got, feedback, "approval")
    assert any(path.startswith("/runs/multipart") for path in got.paths)
    assert not any(path.startswith("/feedback") for path in got.paths)  # batched, not a call


def test_an_older_server_gets_the_same_feedback_as_a_post(tmp_path):
    got = traced("approve", "sync", tmp_path, info=OLD_INFO)
    assert any(path.startswith("/feedback") for path in got.paths)
    [feedback] = got.feedback_keyed("planexec.approval")
    assert (feedback["score"], feedback["value"]) == (1, "approve")
    assert_about(feedback, decided(got, "approve"), "feedback-approve-sync")
    on_root_of_a_sent_trace(got, feedback, "approval")


def test_a_deployment_that_needs_the_project_gets_its_id_asked_once(tmp_path):
    got = traced("reject_cancel", "sync", tmp_path, info=SMITHDB_INFO)
    reject, cancel = got.feedback_keyed("planexec.approval")
    assert reject["session_id"] == cancel["session_id"] == PROJECT["id"]
    assert [p for p in got.paths if p.startswith("/sessions")] == [
        "/sessions?limit=1&name=default&include_stats=False"
    ]
    on_root_of_a_sent_trace(got, reject, "approval")


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_is_feedback_of_its_own_value_naming_the_revision(tmp_path, mode):
    got = traced("edit", mode, tmp_path)
    [feedback] = got.feedback_keyed("planexec.approval")
    assert feedback["value"] == "edit" and feedback.get("score") is None
    decision = decided(got, "edit")
    assert_about(feedback, decision, f"feedback-edit-{mode}")
    assert feedback["extra"]["edited"] == decision["edited"]
    assert feedback["extra"]["edited"]["version"] == 2
    on_root_of_a_sent_trace(got, feedback, "approval")


@pytest.mark.parametrize("mode", MODES)
def test_reject_and_cancel_score_zero_with_their_text_and_no_secret_anywhere(tmp_path, mode):
    got = traced("reject_cancel", mode, tmp_path)
    reject, cancel = got.feedback_keyed("planexec.approval")
    assert (reject["score"], reject["value"]) == (0, "reject")
    assert reject["comment"] == "shorter, and not [redacted]"
    assert reject["extra"]["by"] == {"id": "bob [redacted]", "source": "python"}
    assert (cancel["score"], cancel["value"]) == (0, "cancel")
    assert cancel["comment"] == "not with [redacted]"
    assert cancel["extra"]["by"] == {"id": "carol", "source": "python"}
    assert reject["trace_id"] != cancel["trace_id"]  # each on the trace of its own answer
    for feedback in (reject, cancel):
        on_root_of_a_sent_trace(got, feedback, "approval")
        decision = decided(got, feedback["value"])
        assert feedback["extra"]["version"] == decision["version"]
        assert feedback["extra"]["digest"] == decision["digest"]
    assert reject["extra"]["version"] == 1 and cancel["extra"]["version"] == 2
    # the answers were scrubbed as they came in: the thread's own record holds no secret either
    assert decided(got, "reject")["feedback"] == "shorter, and not [redacted]"
    assert decided(got, "reject")["by"] == {"id": "bob [redacted]", "source": "python"}
    for body in got.bodies:
        for secret in leaky.SECRETS:
            assert secret.encode() not in body, secret


@pytest.mark.parametrize("mode", MODES)
def test_a_policy_approval_is_feedback_by_the_policy(tmp_path, mode):
    got = traced("policy", mode, tmp_path)
    [feedback] = got.feedback_keyed("planexec.approval")
    assert (feedback["score"], feedback["value"]) == (1, "approve")
    assert feedback["extra"]["by"] == {"id": "policy:never", "source": "policy"}
    assert_about(feedback, decided(got, "approve"), f"feedback-policy-{mode}")
    on_root_of_a_sent_trace(got, feedback, "approval")


@pytest.mark.parametrize("mode", MODES)
def test_an_answer_to_a_failed_step_is_step_failure_feedback(tmp_path, mode):
    got = traced("failure", mode, tmp_path)
    [approval] = got.feedback_keyed("planexec.approval")
    assert approval["value"] == "approve"
    # the refused answer before it sent nothing
    [feedback] = got.feedback_keyed("planexec.step_failure")
    assert (feedback["score"], feedback["value"]) == (0, "cancel")
    assert feedback["comment"] == "enough of [redacted]"
    decision = decided(got, "cancel")
    assert_about(feedback, decision, f"feedback-failure-{mode}")
    assert feedback["extra"]["step"] == 1 and feedback["extra"]["kind"] == "step_failure"
    assert feedback["extra"]["by"] == {"id": "dave", "source": "python"}
    on_root_of_a_sent_trace(got, feedback, "failure_review")
    for body in got.bodies:
        for secret in leaky.SECRETS:
            assert secret.encode() not in body, secret


def test_nothing_is_sent_with_tracing_off(tmp_path):
    # a LangSmith key and endpoint in the environment are not a request to trace
    got = traced("reject_cancel", "sync", tmp_path, tracing=False)
    assert got.paths == [] and got.feedback == []
    assert [d["action"] for d in got.decisions] == ["reject", "cancel"]


def test_nothing_is_sent_with_tracing_turned_off_around_the_graph(tmp_path):
    got = traced("reject_cancel", "quiet", tmp_path)
    assert got.feedback == [] and got.runs == {}
    assert [d["action"] for d in got.decisions] == ["reject", "cancel"]


def test_an_endpoint_that_is_down_neither_fails_nor_holds_the_run(tmp_path):
    started = time.monotonic()
    got = traced("failure", "sync", tmp_path, info=OLD_INFO, down=True)
    assert [d["action"] for d in got.decisions] == ["approve", "refused", "cancel"]
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    ("scenario", "down"), [("policy", False), ("approve", False), ("failure", True)]
)
def test_a_slow_or_down_endpoint_never_holds_up_a_decision(tmp_path, scenario, down):
    # /info answers in 60 s (or nobody listens): the decision's node makes no request itself
    got = traced(scenario, "slow", tmp_path, info_delay=60, down=down)
    took = [d["seconds"] for d in got.decisions]
    assert took, "no decision was timed"
    assert max(took) < 1, took
