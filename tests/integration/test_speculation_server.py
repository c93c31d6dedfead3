"""Issue 37 through ``langgraph dev`` + langgraph_sdk: read-only steps run while a human reviews.

Two servers, one per module-scoped fixture (each start costs seconds), serving the tools of one
MCP server of this file's own (``$PLANEXEC_MCP_CONFIG``, the way an operator gives the served
graph tools): ``spec__look`` (read-only and closed-world: ``readOnlyHint``, ``openWorldHint:
false``; slow) and ``spec__send`` (no hints: it may write). Each call appends a line to a log
file, so a test sees what ran, when, how often.

- ``speculating``: the operator allows speculation (``PLANEXEC_SPECULATE=tools``);
- ``plain``: the operator does not (no ``PLANEXEC_SPECULATE``): a client's
  ``{"speculate": true}`` changes nothing.

Every run's plan is ``look(tag) -> look($1) -> send($2)``: two read-only steps that may run
while the plan is asked about, then the side-effecting tail that must wait for the approval.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError

from tests.helpers import plan_of, step
from tests.servers import langgraph_dev

pytestmark = pytest.mark.server

ASSISTANT = "planexec"
LOOK_SECONDS = 1.0
"""How long each read-only step takes."""
WHILE = 3.0
"""How long the second read-only step takes in the tests that answer while it runs."""

TOOLS_SERVER = '''
"""MCP server for test_speculation_server: look (read-only, slow) and send (may write)."""
import os
import time

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("spec", log_level="WARNING")


def note(line: str) -> None:
    with open(os.environ["SPEC_LOG"], "a") as out:
        out.write(f"{time.time():.6f} {line}\\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
async def look(x: str, seconds: float) -> str:
    """Look at x for a while (reads nothing, writes nothing)."""
    note(f"look-start {x}")
    await anyio.sleep(seconds)
    note(f"look-end {x}")
    return f"saw {x}"


@server.tool()
def send(text: str) -> str:
    """Send the text somewhere (no hints: it may write)."""
    note(f"send {text}")
    return f"sent {text}"


server.run()
'''


@dataclass
class Tools:
    """The MCP config both servers read, and the log their tool calls append to."""

    config: Path
    log: Path

    def calls(self, tag: str) -> list[tuple[float, str, str]]:
        """Return the logged calls of one test (``tag`` in their argument): (time, what, arg)."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text().splitlines():
            at, what, arg = line.split(" ", 2)
            if tag in arg:
                found.append((float(at), what, arg))
        return found

    def count(self, tag: str, what: str, arg: str | None = None) -> int:
        """How many logged calls of one test are ``what`` (with exactly ``arg``, if given)."""
        return sum(1 for _, w, a in self.calls(tag) if w == what and arg in (None, a))


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Tools:
    folder = tmp_path_factory.mktemp("spec-tools")
    script = folder / "spec_tools.py"
    script.write_text(TOOLS_SERVER)
    log = folder / "calls.log"
    entry = {"command": sys.executable, "args": [str(script)], "env": {"SPEC_LOG": str(log)}}
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"spec": entry}}))
    return Tools(config, log)


def _served(folder: Path, tools: Tools, **more: str) -> Iterator[str]:
    env = {
        "PLANEXEC_WORKSPACE_ROOT": str(folder / "root"),
        "PLANEXEC_PLAN_MEMORY": "off",
        "PLANEXEC_MCP_CONFIG": str(tools.config),
        **more,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PLANEXEC_SPECULATE", raising=False)  # the server gets only ``more``'s
        with langgraph_dev(folder / "langgraph-dev.log", env) as url:
            yield url


@pytest.fixture(scope="module")
def speculating(tmp_path_factory, tools) -> Iterator[str]:
    """``langgraph dev`` whose operator allows speculation on read-only tools."""
    yield from _served(tmp_path_factory.mktemp("spec-server"), tools, PLANEXEC_SPECULATE="tools")


@pytest.fixture(scope="module")
def plain(tmp_path_factory, tools) -> Iterator[str]:
    """``langgraph dev`` whose operator did not allow speculation."""
    yield from _served(tmp_path_factory.mktemp("plain-server"), tools)


def planner(
    folder: Path,
    tag: str,
    *,
    second: float = LOOK_SECONDS,
    after_reject: dict[str, Any] | None = None,
) -> str:
    """A scripted planner answering ``look(tag) -> look($1) -> send($2)``.

    ``second``: how long the second look takes (long: an answer surely comes while it runs);
    ``after_reject``: the plan it answers once the prompt holds the rejection's feedback.
    """
    plan = plan_of(
        step(1, "spec__look", {"x": tag, "seconds": LOOK_SECONDS}),
        step(2, "spec__look", {"x": "$1.result", "seconds": second}, [1]),
        step(3, "spec__send", {"text": "$2.result"}, [2]),
    )
    replies = [{"match": ".", "tool_calls": [{"name": "Plan", "args": plan}]}]
    if after_reject is not None:
        replies.insert(
            0, {"match": f"not this {tag}", "tool_calls": [{"name": "Plan", "args": after_reject}]}
        )
    path = folder / f"planner-{tag}.json"
    path.write_text(json.dumps(replies))
    return f"scripted:{path}"


@dataclass
class Watched:
    """A run streamed in the background: its parts as they came, with their arrival times."""

    parts: list[tuple[float, str, Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def names(self) -> list[str]:
        """The parts, named: ``interrupt`` for the approval request, else a custom event's name
        (``:step`` appended when it names one step)."""
        named = []
        for _, kind, data in self.parts:
            if kind == "updates" and "__interrupt__" in (data or {}):
                named.append("interrupt")
            elif kind == "custom" and isinstance(data, dict) and "event" in data:
                sid = data.get("step")
                named.append(f"{data['event']}:{sid}" if sid is not None else data["event"])
        return named

    def request(self) -> dict[str, Any]:
        """The approval request (the interrupt's value) the stream carried."""
        for _, kind, data in self.parts:
            if kind == "updates" and "__interrupt__" in (data or {}):
                return dict(data["__interrupt__"][0]["value"])
        raise AssertionError(f"no approval request in {self.names()}")

    async def until(self, name: str, seconds: float = 30) -> float:
        """Wait until a part named ``name`` came; return when it did (``time.time()``)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for (at, *_), seen in zip(self.parts, self.names(), strict=False):
                if seen == name:
                    return at
            if self.task is not None and self.task.done():
                self.task.result()  # the stream's error, if it failed
                break
            await asyncio.sleep(0.01)
        raise AssertionError(f"{name} never came: {self.names()}")

    async def ended(self) -> None:
        """Wait until the stream ended."""
        assert self.task is not None
        await asyncio.wait_for(self.task, 60)


def watch(client: Any, tid: str, context: dict[str, Any]) -> Watched:
    """Start a run on ``tid`` and stream its updates and custom events in the background."""
    watched = Watched()

    async def follow() -> None:
        async for part in client.runs.stream(
            tid,
            ASSISTANT,
            input={"task": "look twice, then send"},
            context=context,
            stream_mode=["updates", "custom"],
        ):
            watched.parts.append((time.time(), part.event, part.data))

    watched.task = asyncio.create_task(follow())
    return watched


async def answered(client: Any, tid: str, answer: dict[str, Any], **create: Any) -> float:
    """Send ``answer`` as a new run (``create``: e.g. multitask_strategy); wait for its end.

    Return the seconds from the answer to the end of its run, which must have succeeded.
    """
    sent = time.monotonic()
    run = await client.runs.create(tid, ASSISTANT, command={"resume": answer}, **create)
    await client.runs.join(tid, run["run_id"])
    took = time.monotonic() - sent
    done = await client.runs.get(tid, run["run_id"])
    assert done["status"] == "success", done
    return took


def new_tag() -> str:
    """A fresh tag for one test's tool arguments (the log's lines of that test hold it)."""
    return f"t{uuid.uuid4().hex[:8]}"


def in_order(names: list[str], first: str, then: str) -> bool:
    """Say whether ``first`` and ``then`` both came, ``first`` before ``then``."""
    return first in names and then in names and names.index(first) < names.index(then)


def run_statuses(runs: list[dict[str, Any]]) -> list[str]:
    """The statuses of a thread's runs, oldest first."""
    return [r["status"] for r in sorted(runs, key=lambda r: r["created_at"])]


def scenario(body: Callable[[Any], Any], url: str) -> Any:
    """Run ``body(client)`` (a coroutine function) against the server at ``url``."""
    return asyncio.run(body(get_client(url=url)))


def test_studio_draws_the_speculator_and_offers_the_switch(speculating):
    async def body(client):
        [assistant] = await client.assistants.search(graph_id=ASSISTANT)
        graph = await client.assistants.get_graph(assistant["assistant_id"])
        return graph, await client.assistants.get_schemas(assistant["assistant_id"])

    graph, schemas = scenario(body, speculating)
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert {("approval", "speculator"), ("speculator", "__end__")} <= edges
    switch = schemas["context_schema"]["properties"]["speculate"]
    assert switch["type"] == "boolean" and switch["default"] is False
    assert "PLANEXEC_SPECULATE" in switch["description"]
    assert {"speculated", "speculation_usage"} <= set(schemas["output_schema"]["properties"])


def test_the_request_comes_first_and_the_read_only_steps_run_while_it_waits(
    speculating, tools, tmp_path
):
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        asked_at = await watched.until("interrupt")
        # while the steps run: the thread is busy (its run has not ended), the request is saved
        during = await client.threads.get_state(tid)
        busy = (await client.threads.get(tid))["status"]
        await watched.ended()
        after = await client.threads.get_state(tid)
        status = (await client.threads.get(tid))["status"]
        before = tools.calls(tag)
        took = await answered(client, tid, {"action": "approve"})
        final = await client.threads.get_state(tid)
        return watched, asked_at, during, busy, after, status, before, took, final

    watched, asked_at, during, busy, after, status, before, took, final = scenario(
        body, speculating
    )
    names = watched.names()
    print(f"\nspeculation on, approved after it ended: answer -> end {took:.2f} s")

    # the request came before the speculative steps ended; their events came after it
    assert in_order(names, "interrupt", "speculative_step_finished:1"), names
    assert in_order(names, "speculative_step_finished:1", "speculative_step_started:2"), names
    assert in_order(names, "speculative_step_finished:2", "speculation_ended"), names
    assert "speculation_started" in names
    assert not any(n.endswith(":3") for n in names), names  # the send step waits
    first_start = min(at for at, what, _ in tools.calls(tag) if what == "look-start")
    assert first_start < asked_at + 0.5
    assert busy == "busy"
    assert during["next"] == ["approval", "speculator"] and during["interrupts"], during["next"]

    # the request says which steps run before the approval; the state holds their results
    request = watched.request()
    assert request["speculation"]["steps"] == [1, 2]
    assert all(not r["approved"] for r in request["speculation"]["results"].values())
    assert status == "interrupted"
    assert after["next"] == ["approval"]
    assert after["values"]["approval"]["speculate"] is True
    speculated = after["values"]["speculated"]
    assert sorted(speculated) == ["1", "2"]
    assert speculated["1"]["record"]["status"] == "succeeded"
    assert speculated["1"]["record"]["output"] == {"result": f"saw {tag}"}
    assert speculated["2"]["record"]["output"] == {"result": f"saw saw {tag}"}
    assert speculated["2"]["version"] == request["version"]
    assert [what for _, what, _ in before].count("send") == 0  # nothing with side effects

    # approved unchanged: both results are taken, only the send step runs after the answer
    values = final["values"]
    assert values["final"]["status"] == "succeeded", values["final"]
    assert values["steps"]["1"].get("speculative") is True
    assert values["steps"]["2"].get("speculative") is True
    assert not values["steps"]["3"].get("speculative")
    assert values["steps"]["3"]["output"] == {"result": f"sent saw saw {tag}"}
    assert not values.get("speculated")
    assert tools.count(tag, "look-start") == 2  # each read-only step ran once
    assert tools.count(tag, "send") == 1


def test_a_client_cannot_turn_speculation_on(plain, tools, tmp_path):
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("interrupt")
        await watched.ended()
        await asyncio.sleep(2 * LOOK_SECONDS)  # time enough for a step that would have started
        before = list(tools.calls(tag))
        asked = await client.threads.get_state(tid)
        took = await answered(client, tid, {"action": "approve"})
        return watched, before, asked, took, await client.threads.get_state(tid)

    watched, before, asked, took, final = scenario(body, plain)
    print(f"\nspeculation off (operator): answer -> end {took:.2f} s")
    assert before == []  # nothing ran before the answer
    assert not any(n.startswith("speculat") for n in watched.names()), watched.names()
    assert "speculation" not in watched.request()
    assert "speculate" not in asked["values"]["approval"]
    assert not asked["values"].get("speculated")
    values = final["values"]
    assert values["final"]["status"] == "succeeded", values["final"]
    assert not any(r.get("speculative") for r in values["steps"].values())
    assert tools.count(tag, "look-start") == 2 and tools.count(tag, "send") == 1


def test_an_answer_that_interrupts_the_speculation_keeps_what_finished(
    speculating, tools, tmp_path
):
    """``multitask_strategy="interrupt"``: the answer stops the speculation at once.

    A step that had finished is taken (not run again); the one under way is cut off and runs
    again after the answer; the side-effecting step runs once, after the answer.
    """
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag, second=WHILE), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("speculative_step_started:2")  # step 1 done, step 2 under way
        answer_at = time.time()
        took = await answered(
            client, tid, {"action": "approve"}, context=context, multitask_strategy="interrupt"
        )
        await watched.ended()
        runs = await client.runs.list(tid)
        return watched, answer_at, took, runs, await client.threads.get_state(tid)

    watched, answer_at, took, runs, final = scenario(body, speculating)
    print(f"\nanswered while speculating (interrupt): answer -> end {took:.2f} s")
    assert run_statuses(runs) == ["interrupted", "success"]
    values = final["values"]
    assert values["final"]["status"] == "succeeded", values["final"]
    assert values["steps"]["1"].get("speculative") is True  # finished before the answer: taken
    assert tools.count(tag, "look-start", tag) == 1
    sends = [at for at, what, _ in tools.calls(tag) if what == "send"]
    assert len(sends) == 1 and sends[0] > answer_at
    assert not values.get("speculated")
    assert "speculative_step_finished:2" not in watched.names()


@pytest.mark.xfail(
    strict=True,
    reason="documented limit (docs/concepts/approval.md): multitask_strategy='interrupt' cancels "
    "the speculative step under way, and the executor runs it again after the answer; the "
    "default strategy (enqueue) stops speculation without cancelling anything",
)
def test_no_read_only_step_runs_twice_when_the_answer_interrupts(speculating, tools, tmp_path):
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag, second=WHILE), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("speculative_step_started:2")
        await answered(
            client, tid, {"action": "approve"}, context=context, multitask_strategy="interrupt"
        )
        await watched.ended()

    scenario(body, speculating)
    assert tools.count(tag, "look-start", f"saw {tag}") == 1


def test_while_it_speculates_reject_refuses_an_answer_and_the_default_queues_it(
    speculating, tools, tmp_path
):
    """The thread's run is under way while the steps run: the server's multitask rules apply.

    ``reject`` answers 409; the default (``enqueue``) queues the answer: the speculator sees
    it (planexec.execution.answers polls the server) and starts no new step, the step under way
    finishes and is taken, and the answer runs then: nothing runs twice.
    """
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("interrupt")
        resume = {"resume": {"action": "approve"}}
        with pytest.raises(ConflictError) as refused:
            await client.runs.create(
                tid, ASSISTANT, command=resume, context=context, multitask_strategy="reject"
            )
        answer_at = time.time()
        took = await answered(client, tid, {"action": "approve"}, context=context)
        await watched.ended()
        runs = await client.runs.list(tid)
        return refused.value, watched, answer_at, took, runs, await client.threads.get_state(tid)

    refused, watched, answer_at, took, runs, final = scenario(body, speculating)
    print(f"\nanswered while speculating (default: enqueue): answer -> end {took:.2f} s")
    assert refused.response.status_code == 409
    assert "Thread is already running a task" in refused.response.text
    assert run_statuses(runs) == ["success", "success"]
    names = watched.names()
    assert "speculative_step_finished:1" in names and "speculation_ended" in names
    assert "speculative_step_started:2" not in names  # the queued answer stopped it starting
    values = final["values"]
    assert values["final"]["status"] == "succeeded", values["final"]
    assert values["steps"]["1"].get("speculative") is True
    assert not values["steps"]["2"].get("speculative")  # ran once, after the approval
    assert tools.count(tag, "look-start") == 2
    sends = [at for at, what, _ in tools.calls(tag) if what == "send"]
    assert len(sends) == 1 and sends[0] > answer_at


def test_a_rejection_while_speculating_discards_every_speculative_result(
    speculating, tools, tmp_path
):
    tag = new_tag()
    only_send = plan_of(step(1, "spec__send", {"text": f"{tag}-b"}), goal="send only")
    script = planner(tmp_path, tag, second=WHILE, after_reject=only_send)
    context = {"planner_model": script, "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("speculative_step_started:2")  # step 1 done, step 2 under way
        await answered(
            client,
            tid,
            {"action": "reject", "feedback": f"not this {tag}"},
            context=context,
            multitask_strategy="interrupt",
        )
        await watched.ended()
        return await client.threads.get_state(tid)

    state = scenario(body, speculating)
    values = state["values"]
    assert state["next"] == ["approval"]  # the new plan waits for its approval
    assert values["plan"]["goal"] == "send only"
    assert not values.get("speculated"), values.get("speculated")
    assert not any(r.get("speculative") for r in (values.get("steps") or {}).values())
    assert tools.count(tag, "send") == 0  # the side-effecting tool never ran
    decisions = [d["action"] for d in values["decisions"]]
    assert decisions == ["reject"], decisions


def test_a_cancel_while_speculating_discards_every_speculative_result(speculating, tools, tmp_path):
    tag = new_tag()
    context = {"planner_model": planner(tmp_path, tag, second=WHILE), "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("speculative_step_started:2")  # step 1 done, step 2 under way
        await answered(
            client, tid, {"action": "cancel"}, context=context, multitask_strategy="interrupt"
        )
        await watched.ended()
        return await client.threads.get_state(tid)

    state = scenario(body, speculating)
    values = state["values"]
    assert state["next"] == []
    assert values["approval"]["action"] == "cancel"
    assert not values.get("speculated"), values.get("speculated")
    assert not any(r.get("speculative") for r in (values.get("steps") or {}).values())
    assert tools.count(tag, "send") == 0


def test_no_speculative_step_starts_after_an_answer_with_the_default_strategy(
    speculating, tools, tmp_path
):
    tag = new_tag()
    only_send = plan_of(step(1, "spec__send", {"text": f"{tag}-b"}), goal="send only")
    script = planner(tmp_path, tag, after_reject=only_send)  # the new plan speculates nothing
    context = {"planner_model": script, "speculate": True}

    async def body(client):
        tid = (await client.threads.create())["thread_id"]
        watched = watch(client, tid, context)
        await watched.until("speculative_step_started:1")
        answer_at = time.time()
        reject = {"action": "reject", "feedback": f"not this {tag}"}
        await answered(client, tid, reject, context=context)
        await watched.ended()
        return answer_at

    answer_at = scenario(body, speculating)
    late = [a for at, what, a in tools.calls(tag) if what == "look-start" and at > answer_at]
    assert late == []  # step 2 of the rejected plan never starts: the queued answer was seen
