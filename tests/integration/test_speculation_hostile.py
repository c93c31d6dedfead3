"""Speculation (issue 37): the hostile review's findings, each a test of its fix.

Each test replays one finding of the hostile review (its repro, made small) through the public
API (``build_graph``, ``invoke`` / ``astream``, ``Command(resume=...)``, ``update_state``,
``stop_speculating``) and fails if that fix is undone.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph, stop_speculating
from planexec.admission import InvalidInputError
from planexec.concurrency.abandoned import abandoned_calls
from planexec.context import Context
from planexec.plan.doc import plan_digest
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox
from tests.helpers import (
    plan_of,
    plan_reply,
    scripted,
    step,
    text_reply,
    thread,
    wait_until,
)

CALLS: list[tuple[str, str]] = []
"""Every tool call of the test, in the order they started: (tool, argument)."""
_LOCK = threading.Lock()
_PAUSES = {"look": 0.05, "slow_look": 0.6, "half_look": 0.5}


def _called(name: str, x: str) -> None:
    with _LOCK:
        CALLS.append((name, x))
    time.sleep(_PAUSES.get(name, 0.0))


@tool
def look(x: str) -> str:
    """Look at x (read-only, inside the workspace); fails on FAIL."""
    _called("look", x)
    if x == "FAIL":
        raise ValueError("cannot look at FAIL")
    return f"saw {x}"


@tool
def slow_look(x: str) -> str:
    """Look long at x (read-only, inside the workspace)."""
    _called("slow_look", x)
    return f"stared at {x}"


@tool
def half_look(x: str) -> str:
    """Look at x for half a second (read-only, inside the workspace)."""
    _called("half_look", x)
    return f"glanced at {x}"


@tool
def big(x: str) -> str:
    """Return a large text made of x (read-only, inside the workspace)."""
    _called("big", x)
    return x * 10_000


@tool
def fetch(x: str) -> str:
    """Fetch x from elsewhere (read-only, but it reaches outside: open world)."""
    _called("fetch", x)
    return f"fetched {x}"


def gauge(x: str) -> str:
    """Measure x (declared read-only and closed-world at registration)."""
    _called("gauge", x)
    return f"measured {x}"


@tool
def send(x: str) -> str:
    """Send x (side effects)."""
    _called("send", x)
    return f"sent {x}"


INSIDE = {"side_effects": False, "open_world": False}
look.metadata = slow_look.metadata = half_look.metadata = big.metadata = INSIDE
fetch.metadata = {"side_effects": False}  # open world: declared nowhere, so it counts as open
send.metadata = {"side_effects": True}
TOOLS = [look, slow_look, half_look, big, fetch, send]

ON, OFF = Context(speculate=True), Context(speculate=False)
APPROVE = Command(resume={"action": "approve"})
WRONG = Command(resume={"action": "approve", "digest": "0" * 64})
"""A refused answer (it names another plan): the plan is asked anew, earlier results kept."""


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    wait_until(lambda: not abandoned_calls(), 3)


def calls(name: str = "look") -> list[str]:
    """The arguments ``name`` was called with so far, in order."""
    with _LOCK:
        return [x for n, x in CALLS if n == name]


def graph_of(*plans: dict[str, Any], tools: Any = None, **options: Any) -> Any:
    """A graph whose planner proposes ``plans`` in turn; the operator allows speculation."""
    planner = scripted(*(plan_reply(p) for p in plans))
    return build_graph(
        InMemorySaver(),
        tools=TOOLS if tools is None else tools,
        models={"planner": planner},
        speculate="tools",
        **options,
    )


def stream_events(graph: Any, value: Any, config: dict, context: Context, mode: str) -> list[Any]:
    """Stream a run's ``updates`` and ``custom`` parts (sync or async) to its end or interrupt."""
    if mode == "sync":
        return list(graph.stream(value, config, context=context, stream_mode=["updates", "custom"]))

    async def go() -> list[Any]:
        parts = graph.astream(value, config, context=context, stream_mode=["updates", "custom"])
        return [part async for part in parts]

    return asyncio.run(go())


# Finding 1: read-only is not enough; a tool that reaches outside waits for the approval.
def test_a_read_only_tool_that_reaches_outside_never_runs_before_approval():
    tools = ToolRegistry([look, fetch, send])
    tools.register(gauge, side_effects=False, open_world=False)
    plan = plan_of(
        step(1, "look", {"x": "payroll"}),
        step(2, "fetch", {"x": "$1"}, [1]),  # would send what step 1 read
        step(3, "gauge", {"x": "$1"}, [1]),
        step(4, "send", {"x": "$2"}, [2, 3]),
    )
    graph = graph_of(plan, tools=tools)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)
    assert calls() == ["payroll"] and calls("gauge") == ["saw payroll"]
    assert calls("fetch") == [] and calls("send") == []
    answered = len(CALLS)
    out = graph.invoke(APPROVE, config, context=ON)
    assert [n for n, _ in CALLS[answered:]] == ["fetch", "send"]
    assert out["steps"]["3"]["speculative"] is True and "speculative" not in out["steps"]["2"]


# Finding 2: a step runs early only if each unfinished dependency runs too or has succeeded.
def test_a_step_whose_dependency_failed_early_is_not_scheduled_alone():
    plan = plan_of(
        step(1, "look", {"x": "a"}),
        step(2, "look", {"x": "$1"}, [1]),
        step(3, "look", {"x": "$2"}, [2]),
        step(4, "send", {"x": "$3"}, [3]),
    )
    graph = graph_of(plan, approval_expires_after=6)  # a hang would end at 3 s (half of it)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)
    graph.invoke(WRONG, config, context=ON)  # refused: the results of 1, 2, 3 are kept
    current = graph.get_state(config).values["plan"]
    failing = {**current["steps"][0], "args": {"x": "FAIL"}}
    graph.update_state(config, {"plan": {**current, "steps": [failing, *current["steps"][1:]]}})
    graph.invoke(APPROVE, config, context=ON)  # refused (the plan changed): 1 fails early
    assert calls()[-1] == "FAIL"
    started = time.monotonic()
    graph.invoke(WRONG, config, context=ON)  # refused again: 2 and 3 hold stale results only
    assert time.monotonic() - started < 1.5, "the speculation waited for a step nothing runs"
    assert calls() == ["a", "saw a", "saw saw a", "FAIL"]
    assert graph.get_state(config).interrupts  # asked anew, at once


# Finding 3: an answer while a read-only step is in flight does not fail the approved plan.
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_answer_while_an_early_step_runs_on_does_not_fail_its_step(mode):
    plan = plan_of(step(1, "slow_look", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan)
    config = thread()
    on = Context(speculate=True, max_replans=0)  # a failed step ends the run: seen below

    def started(chunk: Any) -> bool:
        return isinstance(chunk, dict) and chunk.get("event") == "speculative_step_started"

    if mode == "sync":
        parts = graph.stream({"task": "t"}, config, context=on, stream_mode="custom")
        for chunk in parts:
            if started(chunk):
                time.sleep(0.2)
                break  # the caller goes away: the stream is closed, the call runs on
        parts.close()
        out = graph.invoke(APPROVE, config, context=on)
    else:

        async def go() -> dict[str, Any]:
            parts = graph.astream({"task": "t"}, config, context=on, stream_mode="custom")
            async for chunk in parts:
                if started(chunk):
                    await asyncio.sleep(0.2)
                    break
            await parts.aclose()
            result: dict[str, Any] = await graph.ainvoke(APPROVE, config, context=on)
            return result

        out = asyncio.run(go())
    assert out["final"]["status"] == "succeeded", out["steps"]["1"].get("error")
    assert out["steps"]["1"]["status"] == "succeeded"
    assert calls("send") == ["stared at a"]


# Finding 4a: a reject discards whatever is in `speculated`, however the question was asked.
def test_a_reject_discards_results_kept_from_an_earlier_asking():
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan, plan)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)  # step 1 runs early
    graph.invoke(WRONG, config, context=OFF)  # refused; asked anew by a run that does not speculate
    assert graph.get_state(config).values.get("speculated")
    reject = Command(resume={"action": "reject", "feedback": "no"})
    parts = stream_events(graph, reject, config, OFF, "sync")
    discarded = [c for m, c in parts if m == "custom" and c.get("event") == "speculation_discarded"]
    assert discarded and discarded[0]["steps"] == [1]
    assert not graph.get_state(config).values.get("speculated")
    out = graph.invoke(APPROVE, config, context=OFF)
    assert "speculative" not in out["steps"]["1"] and calls() == ["a", "a"]


# Finding 4b, as decided: a result made under the operator's speculation counts for the same
# step, inputs and place whatever the answering run's own context says (Studio and the SDK
# resume without resending the context).
def test_an_answer_sent_without_the_context_still_takes_the_early_result():
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)
    graph.invoke(WRONG, config, context=ON)  # refused: the early result is in state
    assert graph.get_state(config).values.get("speculated")
    out = graph.invoke(APPROVE, config, context=OFF)
    assert out["steps"]["1"]["speculative"] is True
    assert calls() == ["a"] and out["final"]["status"] == "succeeded"
    assert not graph.get_state(config).values.get("speculated")


# Finding 6: a result is taken only where it was made (the run's workspace, its model).
def test_a_result_read_in_one_shared_folder_is_not_taken_by_a_run_in_another(workspace_root):
    sandbox = Sandbox.at(workspace_root)
    for name in ("alpha", "beta"):
        folder = sandbox.workspace_path(name, None)
        folder.mkdir(parents=True)
        (folder / "data.txt").write_text(f"{name.upper()} DATA")
    plan = plan_of(
        step(1, "read_file", {"path": "data.txt"}),
        step(2, "write_file", {"path": "out.txt", "content": "${1.content}"}, [1]),
    )
    graph = build_graph(
        InMemorySaver(), models={"planner": scripted(plan_reply(plan))}, speculate="tools"
    )
    config = thread()
    graph.invoke({"task": "t"}, config, context=Context(speculate=True, shared_folder="alpha"))
    assert graph.get_state(config).values.get("speculated")  # read alpha's file early
    beta = Context(speculate=True, shared_folder="beta")
    out = graph.invoke(APPROVE, config, context=beta)
    assert "speculative" not in out["steps"]["1"] and out["final"]["status"] == "succeeded"
    written: Path = sandbox.workspace_path("beta", None) / "out.txt"
    assert written.read_text() == "BETA DATA"


def test_a_model_step_done_early_by_one_executor_model_is_not_taken_by_another(use_models):
    plan = plan_of({**step(1, None, {"about": "first"}), "tools": ["look"]})
    alpha, beta = scripted(text_reply("alpha says")), scripted(text_reply("beta says"))
    use_models(planner=scripted(plan_reply(plan)), alpha=alpha, beta=beta)
    graph = build_graph(InMemorySaver(), tools=TOOLS, speculate="models")
    config = thread()

    def run_by(model: str) -> Context:
        return Context(speculate=True, planner_model="test:planner", executor_model=model)

    graph.invoke({"task": "t"}, config, context=run_by("test:alpha"))
    assert len(alpha.prompts) == 1 and graph.get_state(config).values.get("speculated")
    out = graph.invoke(APPROVE, config, context=run_by("test:beta"))
    assert "speculative" not in out["steps"]["1"] and len(beta.prompts) == 1
    assert out["steps"]["1"]["output"] == "beta says"


# Finding 7: a sync caller gets the question with at least half its time left.
def test_a_sync_caller_gets_an_expiring_question_in_time_to_answer_it():
    plan = plan_of(
        step(1, "half_look", {"x": "a"}),
        step(2, "half_look", {"x": "$1"}, [1]),
        step(3, "half_look", {"x": "$2"}, [2]),
        step(4, "send", {"x": "$3"}, [3]),
    )
    graph = graph_of(plan, approval_expires_after=1.2)  # the chain takes 1.5 s
    config = thread()
    started = time.monotonic()
    graph.invoke({"task": "t"}, config, context=ON)
    assert time.monotonic() - started < 1.0  # half its 1.2 s (not all of it), and some slack
    out = graph.invoke(APPROVE, config, context=ON)  # answered at once: in time
    assert out["decisions"][-1]["action"] == "approve"
    assert out["final"]["status"] == "succeeded"
    assert calls("send") == ["glanced at glanced at glanced at a"]


# Finding 8: the updates and tasks streams tell a speculative step from an approved one.
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_updates_stream_names_early_steps_apart(mode):
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan)
    config = thread()
    before = [c for m, c in stream_events(graph, {"task": "t"}, config, ON, mode) if m == "updates"]
    assert calls() == ["a"]
    assert any("speculative_step" in c for c in before)
    assert not any("run_step" in c for c in before)
    after = [c for m, c in stream_events(graph, APPROVE, config, ON, mode) if m == "updates"]
    assert any("run_step" in c for c in after)  # the approved plan's step 2
    assert not any("speculative_step" in c for c in after)


# Finding 9: a result whose spilled file is gone (another branch of a fork) is not taken.
def test_a_fork_does_not_take_a_result_whose_file_another_branch_removed():
    plan = plan_of(step(1, "big", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan, plan)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)
    graph.invoke(WRONG, config, context=ON)  # refused: the early (spilled) result is in state
    assert graph.get_state(config).values["speculated"]["1"]["record"].get("output_file")
    edited = plan_of(step(1, "big", {"x": "b"}), step(2, "send", {"x": "$1"}, [1]))
    edit = Command(resume={"action": "edit", "plan": edited})
    graph.invoke(edit, config, context=ON)  # the edit's run removes the untaken result's file
    history = list(graph.get_state_history(config))
    refused = next(
        s for s in history if (s.values.get("approval") or {}).get("action") == "refused"
    )
    fork = graph.update_state(refused.config, {"feedback": None}, as_node="approval")
    graph.invoke(None, fork, context=ON)  # the fork asks again about the first plan
    out = graph.invoke(APPROVE, config, context=ON)
    assert out["steps"]["2"]["status"] == "succeeded", out["steps"]["2"].get("error")
    assert "speculative" not in out["steps"]["1"] and calls("big") == ["a", "b", "a"]


# Finding 11: no state edit is written as the speculator (it would drop the question).
def test_a_state_edit_as_the_speculator_is_refused():
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "send", {"x": "$1"}, [1]))
    graph = graph_of(plan)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ON)
    current = graph.get_state(config).values["plan"]
    edited = {
        **current,
        "steps": [{**current["steps"][0], "args": {"x": "b"}}, current["steps"][1]],
    }
    with pytest.raises(InvalidInputError, match="as_node='speculator'"):
        graph.update_state(config, {"plan": edited}, as_node="speculator")
    state = graph.get_state(config)
    assert state.interrupts and state.values["plan"] == current  # still asked, unchanged
    assert calls("send") == []


# New: stop_speculating ends the speculation without running anything twice.
def test_stop_speculating_starts_no_new_step_and_nothing_runs_twice():
    plan = plan_of(
        step(1, "half_look", {"x": "a"}),
        step(2, "half_look", {"x": "$1"}, [1]),
        step(3, "half_look", {"x": "$2"}, [2]),
        step(4, "send", {"x": "$3"}, [3]),
    )
    graph = graph_of(plan)
    config = thread()
    thread_id = config["configurable"]["thread_id"]

    async def go() -> dict[str, Any]:
        parts = graph.astream({"task": "t"}, config, context=ON, stream_mode="custom")
        async for chunk in parts:  # the answer comes once step 1 is under way
            if chunk.get("event") == "speculative_step_started" and chunk.get("step") == 1:
                stop_speculating(thread_id, plan_digest(graph.get_state(config).values["plan"]))
        assert calls("half_look") == ["a"]  # the step under way finished; none started after
        assert graph.get_state(config).values["speculated"]["1"]["record"]["status"] == "succeeded"
        result: dict[str, Any] = await graph.ainvoke(APPROVE, config, context=ON)
        return result

    out = asyncio.run(go())
    assert calls("half_look") == ["a", "glanced at a", "glanced at glanced at a"]  # each once
    assert out["steps"]["1"]["speculative"] is True and out["final"]["status"] == "succeeded"


def test_a_stray_stop_speculating_stops_nothing_later():
    """Said while nothing is asked (or late), it does not hold for the next question."""
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "look", {"x": "$1"}, [1]))
    graph = graph_of(plan)
    config = thread()
    stop_speculating(config["configurable"]["thread_id"])  # nothing is asked yet
    graph.invoke({"task": "t"}, config, context=ON)  # sync: returns once speculation ended
    assert sorted(graph.get_state(config).values.get("speculated") or {}) == ["1", "2"]
    assert calls() == ["a", "saw a"]
