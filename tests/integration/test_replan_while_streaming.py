"""With approval ``never``, a revision's new steps start while the replanner is still writing it.

The replanner keeps the succeeded steps; a new step whose line is complete and valid on its own
(kept steps count as done, other new ones must have started) runs before the model has
finished, and the rest of the revision joins the same round once it is whole and valid. Under
``first`` or ``always`` nothing of a revision runs before it is complete (and approved if it
must be). Every step runs once and is recorded, revisions that end the run included.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import PrivateAttr

from planexec import Context, build_graph
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import plan_reply, text_reply
from tests.integration.test_run_while_streaming import Streamed

CALLS: list[str] = []
REVISED = threading.Event()  # a step of the revision was called


@tool
def mark(text: str) -> str:
    """Record a call and return the text."""
    CALLS.append(text)
    if text.startswith("r"):
        REVISED.set()
    return text.upper()


@tool
def broken(reason: str) -> str:
    """Record a call, then fail."""
    CALLS.append(f"broken: {reason}")
    raise ValueError(f"it failed: {reason}")


for _harmless in (mark, broken):  # declared harmless: a revision adding them may run unasked
    _harmless.metadata = {"side_effects": False}


# step 1 succeeds (kept), step 2 fails, step 3 is skipped: the revision's ids start at 2
PLAN = {
    "goal": "mark things",
    "steps": [
        {"mark": {"text": "a"}},
        {"broken": {"reason": "disk full"}},
        {"mark": {"text": "c after ${2}"}},
    ],
}
# compact, as the replanner writes it: $1 is the kept step, $2.. the revision's own steps
REVISION = {
    "goal": "mark things",
    "steps": [
        {"mark": {"text": "r1 after ${1}"}},
        {"mark": {"text": "r2 after ${2}"}},
        {"description": "say something about $3", "args": {"x": "$3"}},
        {"mark": {"text": "r4 after ${4}"}},
        {"mark": {"text": "r5"}},
    ],
}
RAN = ["a", "broken: disk full", "r1 after A", "r2 after R1 AFTER A", "r4 after MODEL SAYS HI"]
RAN = sorted([*RAN, "r5"])
NOPE = {"nope": {"what": "a step whose tool does not exist, written at some length"}}


class HeldRevision(Streamed):
    """Streams every reply; holds the last quarter of a revision until one of its steps ran."""

    hold_seconds: float = 10.0
    _held: list[bool] = PrivateAttr(default_factory=list)
    _revising: bool = PrivateAttr(default=False)

    def _stream(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self._revising = "did not fully succeed" in str(messages[0].content) + "".join(
            str(m.content) for m in messages
        )
        yield from super()._stream(messages, *args, **kwargs)

    def deliver(self, chunks: list[ChatGenerationChunk]) -> Iterator[ChatGenerationChunk]:
        if not self._revising:
            yield from chunks
            return
        yield from chunks[: len(chunks) * 3 // 4]
        self._held.append(REVISED.wait(timeout=self.hold_seconds))
        yield from chunks[len(chunks) * 3 // 4 :]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    CALLS.clear()
    REVISED.clear()
    yield


def graph_for(policy: str, planner: ScriptedChatModel) -> Any:
    executor = ScriptedChatModel(replies=[text_reply("MODEL SAYS HI", match="say something")])
    return build_graph(
        InMemorySaver(),
        tools=ToolRegistry([mark, broken]),
        approval=policy,  # type: ignore[arg-type]
        models={"planner": planner, "executor": executor},
    )


def revising(*revisions: ScriptedReply, hold_seconds: float = 10.0) -> HeldRevision:
    """The planner's model: the plan for any task, then the revisions (in order)."""
    return HeldRevision(
        replies=[*revisions, plan_reply(PLAN, match="mark things")],
        stream_chunk_chars=8,
        hold_seconds=hold_seconds,
    )


def revision(plan: dict[str, Any]) -> ScriptedReply:
    return plan_reply(plan, match="did not fully succeed")


def run(graph: Any, config: dict[str, Any], value: Any, asynchronous: bool, **ctx: Any) -> Any:
    context = Context(approval="never", **ctx)
    if asynchronous:
        return asyncio.run(graph.ainvoke(value, config, context=context))
    return graph.invoke(value, config, context=context)


def statuses(state: dict[str, Any]) -> dict[str, str]:
    return {k: r["status"] for k, r in state["steps"].items()}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_with_approval_never_a_revisions_steps_start_while_it_streams(
    tmp_path, monkeypatch, asynchronous
):
    monkeypatch.chdir(tmp_path)
    planner = revising(revision(REVISION))
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"n-{asynchronous}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous)

    assert planner._held == [True]  # a step ran before the model had written the revision
    assert sorted(CALLS) == RAN  # each once: the kept step 1 was not run again
    state = graph.get_state(config).values
    assert statuses(state) == {str(i): "succeeded" for i in range(1, 7)}
    assert state["plan"]["version"] == 2
    assert [s["id"] for s in state["plan"]["steps"]] == [1, 2, 3, 4, 5, 6]
    assert state["approved"]["by"] == "policy"
    assert state["replans"] == 1
    assert [r["version"] for r in state["revisions"]] == [1]  # the plan the revision replaced
    assert state["steps"]["3"]["output"] == "R2 AFTER R1 AFTER A"
    assert result["final"]["status"] == "succeeded"


@pytest.mark.parametrize("policy", ["first", "always"])
def test_with_a_human_to_ask_nothing_of_a_revision_runs_before_it_is_whole(
    tmp_path, monkeypatch, policy
):
    # under first, the revision adds no side-effecting tool and runs unasked, but only once it
    # is whole (that is judged on the whole revision); under always it waits for the approval
    monkeypatch.chdir(tmp_path)
    planner = revising(revision(REVISION), hold_seconds=1.0)
    graph = graph_for(policy, planner)
    config = {"configurable": {"thread_id": f"f-{policy}"}}
    ctx = Context(approval="never")  # the run's own policy cannot loosen the operator's
    first = graph.invoke({"task": "mark things"}, config, context=ctx)
    pending = first["__interrupt__"][0].value
    answer = {"action": "approve", "version": pending["version"], "digest": pending["digest"]}
    out = graph.invoke(Command(resume=answer), config, context=ctx)
    assert planner._held == [False]  # no step of the revision ran while it streamed
    if policy == "always":
        pending = out["__interrupt__"][0].value
        assert pending["version"] == 2
        assert not [c for c in CALLS if c.startswith("r")]  # nothing before the approval
        answer = {"action": "approve", "version": 2, "digest": pending["digest"]}
        out = graph.invoke(Command(resume=answer), config, context=ctx)
    assert sorted(CALLS) == RAN
    assert out["final"]["status"] == "succeeded"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_revision_that_stays_invalid_ends_the_run_with_its_started_steps_recorded(
    tmp_path, monkeypatch, asynchronous
):
    # r1 starts as the revision streams; the revision then names an unknown tool and no
    # repair is allowed: the run ends with a partial result, and r1 (run once) is recorded
    monkeypatch.chdir(tmp_path)
    bad = {"goal": "mark things", "steps": [{"mark": {"text": "r1 after ${1}"}}, NOPE]}
    planner = revising(revision(bad))
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"i-{asynchronous}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous, max_plan_repairs=0)

    assert planner._held == [True]
    assert sorted(CALLS) == ["a", "broken: disk full", "r1 after A"]
    assert result["final"]["status"] == "partial"
    assert "no valid revision" in result["final"]["answer"]
    state = graph.get_state(config).values
    assert state["plan"]["version"] == 1  # the run ended on the plan it had
    started = state["revisions"][-1]
    assert started["version"] == 2
    assert [(s["id"], s["args"]) for s in started["plan"]["steps"]] == [
        (2, {"text": "r1 after ${1}"})
    ]
    assert started["outcomes"]["2"]["status"] == "succeeded"
    assert started["outcomes"]["2"]["output"] == "R1 AFTER A"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_repaired_revision_keeps_the_result_of_a_step_that_started_early(
    tmp_path, monkeypatch, asynchronous
):
    # the first draft of the revision is invalid after r1 started; the repaired one has r1
    # too: its record carries over (r1 is not run again), the rest runs after the approval
    monkeypatch.chdir(tmp_path)
    bad = {"goal": "mark things", "steps": [{"mark": {"text": "r1 after ${1}"}}, NOPE]}
    good = {
        "goal": "mark things",
        "steps": [{"mark": {"text": "r1 after ${1}"}}, {"mark": {"text": "r5"}}],
    }
    planner = revising(plan_reply(good, match="did not fully succeed.*nope"), revision(bad))
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"r-{asynchronous}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous)

    assert planner._held[0] is True  # r1 ran while the first draft streamed
    assert sorted(CALLS) == ["a", "broken: disk full", "r1 after A", "r5"]
    assert result["final"]["status"] == "succeeded"
    state = graph.get_state(config).values
    assert statuses(state) == {"1": "succeeded", "2": "succeeded", "3": "succeeded"}
    assert [r["version"] for r in state["revisions"]] == [1]  # nothing lost: r1 is the plan's


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_revision_repeating_the_failed_step_runs_nothing_and_ends_the_run(
    tmp_path, monkeypatch, asynchronous
):
    # a step that repeats a failed one never starts before the revision is whole: a revision
    # of only such steps ends the run, and the failing step did not run a second time
    monkeypatch.chdir(tmp_path)
    same = {"goal": "mark things", "steps": [{"broken": {"reason": "disk full"}}]}
    planner = revising(revision(same), hold_seconds=0.5)
    graph = graph_for("never", planner)
    config = {"configurable": {"thread_id": f"s-{asynchronous}"}}
    result = run(graph, config, {"task": "mark things"}, asynchronous)
    assert CALLS.count("broken: disk full") == 1
    assert result["final"]["status"] == "partial"
    assert "same failing steps again" in result["final"]["answer"]
