"""Speculation (issue 37): the round-2 hostile review's findings, each a test of its fix.

Each test replays one finding (its repro in /tmp/hostile37b, made small) through the surface
the repro used and fails if that fix is undone:

- F1 (repro 28): an operator's own ``side_effects`` / ``open_world`` marks on a
  langchain-mcp-adapters tool win over the server's hints (``tools.mcp.adapters.adapt``).
- F2 (repro 37): an input file changed while the plan is reviewed: the early read is not
  taken (``execution.speculation.where_of`` fingerprints the workspace's files).
- F3 (repros 24, 31): a resume whose operator no longer speculates (a graph built without it;
  ``planexec resume`` without ``--speculate``) takes back what the interrupted attempt
  finished, so a reject or a cancel still discards it and its spilled file
  (``nodes.speculator.speculate``).
- F5 (repro 27): Ctrl-C at a ``--speculate`` prompt whose stdin is an open pipe exits 130, no
  "Fatal Python error" (``cli.guard``).
- F6 (repro 35): a reject given while read-only steps run stops the run at once: the revised
  plan is asked within a fraction of a second (``runs.streaming.stops_the_run``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest
from langchain_core.tools import BaseTool, tool
from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import planexec
from planexec import build_graph
from planexec.context import Context
from planexec.runs import Runs, new_run
from planexec.tools import default_registry
from tests.helpers import ROOT, plan_of, plan_reply, scripted, step, thread, wait_until
from tests.integration.test_cli_pty import WRAPPER, finish, spawn
from tests.integration.test_speculation_cli import SLOW_PLAN, TOOLS_MODULE

SPECULATE = Context(speculate=True)
RETURN = "__return__"
"""The channel of a LangGraph task's saved result."""

CALLS: list[tuple[str, str]] = []
"""Every tool call of the test, in the order they started: (tool, argument)."""
_LOCK = threading.Lock()
RELEASE = threading.Event()
"""Lets a held read-only call end (set at each test's end: no call outlives its test)."""


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    CALLS.clear()
    RELEASE.clear()
    yield
    RELEASE.set()


def _called(name: str, x: str) -> None:
    with _LOCK:
        CALLS.append((name, x))


def calls(name: str) -> list[str]:
    """The arguments ``name`` was called with, in order."""
    return [x for n, x in CALLS if n == name]


@tool
def send(x: str) -> str:
    """Send x somewhere (a side effect)."""
    _called("send", x)
    return f"sent {x}"


send.metadata = {"side_effects": True}


@tool
def big(x: str) -> str:
    """Return a large text made of x (read-only, inside the workspace): it is spilled."""
    _called("big", x)
    return x * 10_000


@tool
def held(x: str) -> str:
    """Look at x until released, at most 3 s (read-only, inside the workspace)."""
    _called("held", x)
    RELEASE.wait(3.0)
    return f"held {x}"


for _read_only in (big, held):
    _read_only.metadata = {"side_effects": False, "open_world": False}


# F1 (repro 28): the operator's metadata marks on an adapters tool win over the server's hints.
class FakeSession:
    """An MCP client session whose tool calls are only recorded."""

    async def call_tool(self, name: str, arguments: Any = None, **_: Any) -> mt.CallToolResult:
        """Record the call; say it worked."""
        _called(name, json.dumps(arguments))
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="done")])


def read_only_by_its_server(name: str, **operator_marks: bool) -> BaseTool:
    """A langchain-mcp-adapters tool whose server says readOnlyHint, not openWorldHint."""
    spec = mt.Tool(
        name=name,
        description=f"{name} x",
        inputSchema={"type": "object", "properties": {"x": {"type": "string"}}},
        annotations=mt.ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )
    made = convert_mcp_tool_to_langchain_tool(FakeSession(), spec, server_name="srv")
    made.metadata = {**(made.metadata or {}), **operator_marks}  # the tools guide's way
    return made


@pytest.mark.parametrize("mark", ["side_effects", "open_world"])
def test_an_operators_own_mark_on_an_adapters_tool_wins_over_the_servers_hints(mark):
    peek = read_only_by_its_server("peek")  # the server's word stands: runs early
    marked = read_only_by_its_server("marked", **{mark: True})
    plan = plan_of(step(1, "peek", {"x": "a"}), step(2, "marked", {"x": "b"}))
    graph = build_graph(
        InMemorySaver(),
        tools=[peek, marked],
        models={"planner": scripted(plan_reply(plan))},
        speculate="tools",
    )
    config = thread()
    asked = graph.invoke({"task": "t"}, config, context=SPECULATE)
    assert asked.get("__interrupt__")
    assert sorted(n for n, _ in CALLS) == ["peek"]  # speculation ran; the marked tool waited
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=SPECULATE)
    assert [n for n, _ in CALLS] == ["peek", "marked"]  # once, after the approval
    assert out["steps"]["1"]["speculative"] is True
    assert "speculative" not in out["steps"]["2"]


# F2 (repro 37): a file changed during the review: the early read of it is not taken.
@pytest.mark.parametrize("fixed_during_review", [True, False])
def test_an_input_file_changed_during_the_review_is_read_again(tmp_path, fixed_during_review):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data = workspace / "data.txt"
    data.write_text("amount=1000000 (WRONG)")
    tools = default_registry()
    tools.register(send)
    plan = plan_of(
        step(1, "read_file", {"path": "data.txt"}),
        step(2, "send", {"x": "${1.content}"}, [1]),
    )
    graph = build_graph(
        InMemorySaver(),
        tools=tools,
        models={"planner": scripted(plan_reply(plan))},
        speculate="tools",
        workspace=str(workspace),
    )
    config = thread()
    graph.invoke({"task": "t"}, config, context=SPECULATE)
    assert "1" in (graph.get_state(config).values.get("speculated") or {})  # read early
    if fixed_during_review:
        data.write_text("amount=1000 (fixed by the reviewer)")
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=SPECULATE)
    if fixed_during_review:
        assert calls("send") == ["amount=1000 (fixed by the reviewer)"]
        assert "speculative" not in out["steps"]["1"]  # read again after the approval
    else:  # nothing changed: the early read is kept
        assert calls("send") == ["amount=1000000 (WRONG)"]
        assert out["steps"]["1"]["speculative"] is True


# F3 (repros 24, 31): a resume on a graph that no longer speculates still discards.
def test_a_reject_on_a_graph_that_no_longer_speculates_discards_the_interrupted_results():
    plan = plan_of(step(1, "big", {"x": "y"}), step(2, "held", {"x": "a"}), step(3, "send",
                   {"x": "$1"}, [1, 2]))  # fmt: skip
    revised = plan_of(step(1, "send", {"x": "other"}))
    saver = InMemorySaver()
    first = build_graph(
        saver,
        tools=[big, held, send],
        models={"planner": scripted(plan_reply(plan))},
        speculate="tools",
    )
    folder = first.sandbox.output_store().folder
    config = thread()
    stream = first.stream({"task": "t"}, config, context=SPECULATE, stream_mode="custom")
    for event in stream:  # interrupted (a crash, a Ctrl-C) once step 1's result is saved
        if event.get("event") == "speculative_step_finished" and event.get("step") == 1:
            break
    assert wait_until(lambda: saved_results(saver, config) >= 1, 5)
    stream.close()
    spilled = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    assert spilled  # step 1's large result went to a file
    # resumed by an operator who no longer allows it (`planexec resume` without --speculate)
    later = build_graph(
        saver,
        tools=[big, held, send],
        models={"planner": scripted(plan_reply(revised))},
        speculate="off",
    )
    said = [
        e
        for _, e in later.stream(
            Command(resume={"action": "reject", "feedback": "no"}),
            config,
            context=SPECULATE,
            stream_mode=["custom", "values"],
        )
        if isinstance(e, dict) and e.get("event") == "speculation_discarded"
    ]
    assert said and said[0]["steps"] == [1]
    assert not [p for p in spilled if p.exists()]  # its spilled file is gone
    values = graph_values(later, config)
    assert not values.get("speculated") and not calls("send")
    assert calls("big") == ["y"]  # never run again


def saved_results(saver: InMemorySaver, config: Any) -> int:
    """How many step tasks of the running superstep have their result saved.

    The event saying a step ran comes a moment before LangGraph saves its task's result.
    """
    saved = saver.get_tuple(config)
    writes = (saved.pending_writes or []) if saved is not None else []
    return sum(1 for _, channel, _ in writes if channel == RETURN)


def graph_values(graph: Any, config: Any) -> dict[str, Any]:
    """The thread's current state values."""
    return dict(graph.get_state(config).values)


BIG_TOOLS = (
    TOOLS_MODULE
    + '''

def big(x: str) -> str:
    """A large text made of x: read-only, spilled to a file."""
    _log(f"big {x}")
    return x * 20_000


big.metadata = {"side_effects": False, "open_world": False}
BIG = [big, look, send]
'''
)


def saved_returns(db: Path) -> int:
    """How many of the speculator's step tasks have their result saved in the run's database.

    The line saying a step ran comes a moment before LangGraph saves the task's result: a
    Ctrl-C in between loses the result (the step runs again), and its spilled file stays.
    """
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        query = "SELECT count(*) FROM writes WHERE channel = ? AND task_path LIKE ?"
        return int(connection.execute(query, (RETURN, "%speculator%")).fetchone()[0])


def test_cli_resume_without_speculate_and_cancel_discards_the_spilled_file(tmp_path):
    (tmp_path / "speclib.py").write_text(BIG_TOOLS)
    plan = plan_of(step(1, "big", {"x": "b"}), step(2, "look", {"x": "a", "seconds": 3.0}),
                   step(3, "send", {"x": "$2"}, [1, 2]))  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    tools, log = ["--tools", "speclib.py:BIG"], {"SPEC_LOG": str(tmp_path / "calls.log")}
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws", *tools,
                  "--speculate", "tools", **log)  # fmt: skip
    child.expect(r"step 1(\x1b\[[0-9;]*m)* ran before approval")  # its file is written
    assert wait_until(lambda: saved_returns(tmp_path / "runs.sqlite") >= 1, 10)
    child.sendintr()  # step 2 still runs
    text, code = finish(child)
    assert code == 130, text
    thread_id = re.search(r"planexec resume ([0-9a-f-]{36})", text).group(1)
    outputs = tmp_path / "outputs"  # the autouse fixture's $PLANEXEC_OUTPUTS_DIR
    assert [p for p in outputs.rglob("*") if p.is_file()]
    resumed = spawn(tmp_path, "resume", thread_id, *tools, **log)  # no --speculate
    resumed.expect(r"Run this plan\?")
    resumed.sendline("c")
    text, code = finish(resumed)
    assert "discarded: step 1" in text, text
    assert not [p for p in outputs.rglob("*") if p.is_file()]
    assert "send" not in (tmp_path / "calls.log").read_text()


# F5 (repro 27): Ctrl-C at the prompt, stdin an open pipe that never answers: exit 130.
def test_ctrl_c_at_a_speculating_prompt_with_a_piped_stdin_exits_130(tmp_path):
    (tmp_path / "speclib.py").write_text(TOOLS_MODULE)
    (tmp_path / "plan.json").write_text(json.dumps(SLOW_PLAN))
    log = tmp_path / "calls.log"
    env = {**os.environ, "PLANEXEC_DB": str(tmp_path / "runs.sqlite"), "SPEC_LOG": str(log)}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(planexec.__file__).parents[1]), str(ROOT)])
    out = tmp_path / "out.txt"  # a file: with a pipe the old shutdown happened not to abort
    with out.open("wb") as written:
        child = subprocess.Popen(
            [sys.executable, str(WRAPPER), "run", "--plan", "plan.json", "--workspace", "ws",
             "--tools", "speclib.py:TOOLS", "--speculate", "tools"],
            cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=written,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
    try:  # stdin stays open and says nothing, as in a CI job or a script
        assert wait_until(lambda: log.exists() and "look a" in log.read_text(), 20)
        time.sleep(0.3)  # the prompt's thread reads stdin; step 1 still runs
        child.send_signal(signal.SIGINT)
        child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stdin is not None
        child.stdin.close()
    text = out.read_text(errors="replace")
    assert child.returncode == 130, text
    assert "Fatal Python error" not in text and "Traceback" not in text
    assert re.search(r"planexec resume [0-9a-f-]{36}", text), text
    assert "send" not in log.read_text()


# F6 (repro 35): a reject while a read-only step runs: the revised plan is asked at once.
def test_a_reject_while_a_read_only_step_runs_asks_the_revised_plan_at_once():
    plan = plan_of(step(1, "held", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    revised = plan_of(step(1, "send", {"x": "other"}))
    runs = Runs(
        InMemorySaver(),
        tools=[held, send],
        speculate="tools",
        models={"planner": scripted(plan_reply(plan), plan_reply(revised))},
    )
    asked: list[float] = []
    rejected: list[float] = []

    def decide(request: Any) -> dict[str, str]:
        asked.append(time.monotonic())
        if not rejected:
            assert wait_until(lambda: calls("held"), 5)  # the early step runs
            rejected.append(time.monotonic())
            return {"action": "reject", "feedback": "not this"}
        return {"action": "cancel", "reason": "done"}

    asyncio.run(runs.astart(new_run("t", context=SPECULATE), decide=decide))
    assert len(asked) == 2 and not calls("send")
    assert asked[1] - rejected[0] < 1.0  # not after the held step's 3 s
