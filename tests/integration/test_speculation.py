"""Speculation (issue 37): read-only steps run while a human reviews the plan, and the
approval contract still holds exactly.

Every test drives planexec as a Python user does (``build_graph(..., speculate=...)``,
``Context(speculate=True)``, ``invoke`` / ``ainvoke`` / ``astream``, ``Command(resume=...)``,
``update_state``) with real tools that record their calls, and checks what ran, and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.concurrency.abandoned import abandoned_calls
from planexec.context import Context
from planexec.errors import ConfigurationError
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from tests.helpers import (
    plan_of,
    plan_reply,
    savers,
    scripted,
    step,
    text_reply,
    thread,
    wait_until,
)
from tests.integration.test_budgets import FixedUsage

PAUSE = 0.1
"""Seconds each read-only tool call takes (long enough to see order and overlap)."""

CALLS: list[dict[str, Any]] = []
"""Every tool call of the test: its tool, argument, and when it started and ended."""
_LOCK = threading.Lock()


@contextlib.contextmanager
def recorded(name: str, arg: str) -> Iterator[None]:
    """Record a tool call (its start at once, its end when it returns)."""
    entry: dict[str, Any] = {"tool": name, "arg": arg, "start": time.time()}
    with _LOCK:
        CALLS.append(entry)
    try:
        yield
    finally:
        entry["end"] = time.time()


@tool
def look(x: str) -> str:
    """Look at x (read-only; takes a moment)."""
    with recorded("look", x):
        time.sleep(PAUSE)
    return f"saw {x}"


@tool
def slow_look(x: str) -> str:
    """Look long at x (read-only; takes a while)."""
    with recorded("slow_look", x):
        time.sleep(0.3)
    return f"stared at {x}"


@tool
def big(x: str) -> str:
    """Return a large text made of x (read-only)."""
    with recorded("big", x):
        pass
    return x * 10_000


@tool
def send(x: str) -> str:
    """Send x (side effects)."""
    with recorded("send", x):
        pass
    return f"sent {x}"


@tool
def undeclared(x: str) -> str:
    """Do something with x (declares nothing about its side effects)."""
    with recorded("undeclared", x):
        pass
    return f"did {x}"


@tool
def fetch(x: str) -> str:
    """Fetch x from elsewhere (read-only, but it reaches outside the workspace)."""
    with recorded("fetch", x):
        pass
    return f"fetched {x}"


INSIDE = {"side_effects": False, "open_world": False}
"""Declared read-only and reaching nothing outside the workspace: may run before approval."""
look.metadata = slow_look.metadata = big.metadata = INSIDE
fetch.metadata = {"side_effects": False}  # where it reaches: declared nowhere
send.metadata = {"side_effects": True, "open_world": False}
TOOLS = [look, slow_look, big, fetch, send, undeclared]

SPECULATE = Context(speculate=True)
APPROVE = Command(resume={"action": "approve"})
CHAIN = plan_of(
    step(1, "look", {"x": "a"}),
    step(2, "look", {"x": "$1"}, [1]),
    step(3, "send", {"x": "$2"}, [2]),
)
"""Two read-only steps, then one with side effects on their result."""


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    wait_until(lambda: not abandoned_calls(), 2)


def calls(name: str = "look") -> list[str]:
    """The arguments ``name`` was called with so far, in order."""
    return [c["arg"] for c in CALLS if c["tool"] == name]


def graph_of(
    *plans: dict[str, Any],
    speculate: Any = "tools",
    saver: Any = None,
    executor: ScriptedChatModel | None = None,
    **options: Any,
) -> tuple[Any, ScriptedChatModel]:
    """A graph with the test's tools whose planner proposes ``plans`` in turn."""
    planner = scripted(*(plan_reply(p) for p in plans))
    models: dict[str, Any] = {"planner": planner}
    if executor is not None:
        models["executor"] = executor
    saver = saver if saver is not None else InMemorySaver()
    graph = build_graph(saver, tools=TOOLS, models=models, speculate=speculate, **options)
    return graph, planner


def run(graph: Any, value: Any, config: dict, context: Context, mode: str) -> dict[str, Any]:
    """``invoke`` (sync) or ``ainvoke`` (async): the state (and interrupt) it ends with."""
    if mode == "sync":
        out: dict[str, Any] = graph.invoke(value, config, context=context)
        return out
    return asyncio.run(graph.ainvoke(value, config, context=context))


def ask(graph: Any, config: dict, mode: str = "sync", context: Context = SPECULATE) -> Any:
    """Start a run; return the approval request it stops at."""
    return run(graph, {"task": "t"}, config, context, mode)["__interrupt__"][0].value


def events(graph: Any, value: Any, config: dict, mode: str) -> list[dict[str, Any]]:
    """Stream a run's ``custom`` events (sync or async) to its end or next interrupt."""
    if mode == "sync":
        return list(graph.stream(value, config, context=SPECULATE, stream_mode="custom"))

    async def go() -> list[dict[str, Any]]:
        stream = graph.astream(value, config, context=SPECULATE, stream_mode="custom")
        return [event async for event in stream]

    return asyncio.run(go())


def named(found: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in found if isinstance(e, dict) and e.get("event") == name]


# 1. Opt-in: by the operator and by the run, both.
@pytest.mark.parametrize(
    ("operator", "asked", "early"),
    [
        ("off", True, False),
        (False, True, False),
        ("tools", False, False),
        ("tools", True, True),
        (True, True, True),
        ("models", True, True),
    ],
)
def test_steps_run_early_only_when_the_operator_allows_and_the_run_asks(operator, asked, early):
    graph, _ = graph_of(CHAIN, speculate=operator)
    request = ask(graph, thread(), context=Context(speculate=asked))
    assert calls() == (["a", "saw a"] if early else [])
    assert calls("send") == []
    assert ("speculation" in request) is early


def test_the_operator_allows_it_by_environment_and_a_bad_value_is_refused(monkeypatch):
    monkeypatch.setenv("PLANEXEC_SPECULATE", "tools")
    graph, _ = graph_of(CHAIN, speculate=None)
    ask(graph, thread())
    assert calls() == ["a", "saw a"]

    CALLS.clear()
    monkeypatch.setenv("PLANEXEC_SPECULATE", "off")
    graph, _ = graph_of(CHAIN, speculate=None)
    ask(graph, thread())
    assert calls() == []

    monkeypatch.setenv("PLANEXEC_SPECULATE", "tools")  # the operator's argument wins
    graph, _ = graph_of(CHAIN, speculate=False)
    ask(graph, thread())
    assert calls() == []

    monkeypatch.setenv("PLANEXEC_SPECULATE", "sometimes")
    with pytest.raises(ConfigurationError, match="PLANEXEC_SPECULATE"):
        graph_of(CHAIN, speculate=None)


# 2. Nothing with side effects (declared, undeclared or unknown) starts before its approval.
NEVER_EARLY = {  # a plan, and the steps of it that may run early
    "side-effecting": (plan_of(step(1, "send", {"x": "a"})), []),
    "undeclared": (plan_of(step(1, "undeclared", {"x": "a"})), []),
    "read-only but reaching outside": (plan_of(step(1, "fetch", {"x": "a"})), []),
    "reaching outside after a read": (
        plan_of(step(1, "look", {"x": "secret"}), step(2, "fetch", {"x": "$1"}, [1])),
        [1],
    ),
    "read-only after a side effect": (
        plan_of(step(1, "send", {"x": "a"}), step(2, "look", {"x": "$1"}, [1])),
        [],
    ),
    "read-only after an undeclared": (
        plan_of(step(1, "undeclared", {"x": "a"}), step(2, "look", {"x": "b"}, [1])),
        [],
    ),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", list(NEVER_EARLY))
def test_a_step_that_is_not_declared_read_only_never_runs_early(name, mode):
    plan, early = NEVER_EARLY[name]
    graph, _ = graph_of(plan, speculate="models")
    config = thread()
    ask(graph, config, mode)
    assert [c["tool"] for c in CALLS] == ["look"] * len(early)
    answered = time.time()
    out = run(graph, APPROVE, config, SPECULATE, mode)
    assert out["final"]["status"] == "succeeded"
    late = [c for c in CALLS if c["tool"] != "look"]
    assert late and all(c["start"] >= answered for c in late)  # each after the approval
    assert [int(k) for k, r in out["steps"].items() if r.get("speculative")] == early


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_model_step_runs_early_only_under_models_with_read_only_tools(mode):
    plan = plan_of(
        {**step(1, None, {"about": "first"}), "tools": ["look"]},
        {**step(2, None, {"about": "second"}), "tools": ["send"]},
        {**step(3, None, {"about": "third"}), "tools": ["undeclared"]},
    )
    for operator, early in (("tools", 0), ("models", 1)):
        executor = scripted(*(text_reply("noted") for _ in range(3)))
        graph, _ = graph_of(plan, speculate=operator, executor=executor)
        config = thread()
        ask(graph, config, mode)
        assert len(executor.prompts) == early, (operator, executor.prompts)
        assert all("first" in p for p in executor.prompts)
        out = run(graph, APPROVE, config, SPECULATE, mode)
        assert len(executor.prompts) == 3 and out["final"]["status"] == "succeeded"
        assert bool(out["steps"]["1"].get("speculative")) is bool(early)
        assert not out["steps"]["2"].get("speculative") and not out["steps"]["3"].get("speculative")


def test_an_early_model_step_cannot_call_a_tool_its_step_does_not_list():
    plan = plan_of({**step(1, None, {"about": "first"}), "tools": ["look"]})
    sneaky = ScriptedReply(tool_calls=[{"name": "send", "args": {"x": "sneaked"}}])
    executor = scripted(sneaky, text_reply("noted"), sneaky, text_reply("noted"))
    graph, _ = graph_of(plan, speculate="models", executor=executor)
    config = thread()
    ask(graph, config)
    assert executor.prompts and calls("send") == []
    held = graph.get_state(config).values["speculated"]["1"]["record"]
    assert held["refused_calls"][0]["tool"] == "send"
    run(graph, APPROVE, config, SPECULATE, "sync")
    assert calls("send") == []


def test_a_plan_edited_in_state_to_name_an_unknown_tool_runs_nothing_early():
    graph, _ = graph_of(plan_of(step(1, "look", {"x": "a"})))
    config = thread()
    asked = ask(graph, config)
    assert calls() == ["a"]
    edited = {
        **asked["plan"],
        "steps": [
            *asked["plan"]["steps"],
            step(2, "no_such_tool", {"x": "b"}),
            step(3, "look", {"x": "fresh"}),
        ],
    }
    graph.update_state(config, {"plan": edited})
    again = graph.invoke(None, config, context=SPECULATE)["__interrupt__"][0].value
    assert any("no_such_tool" in p for p in again["problems"])
    assert calls() == ["a"]  # the invalid plan's read-only step did not run


# 3. A speculative result is used only for a step approved unchanged, with unchanged inputs.
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_approved_unchanged_the_early_results_are_used_and_not_run_again(mode):
    graph, _ = graph_of(CHAIN)
    config = thread()
    request = ask(graph, config, mode)
    assert calls() == ["a", "saw a"] and calls("send") == []
    assert request["speculation"]["steps"] == [1, 2]
    out = run(graph, APPROVE, config, SPECULATE, mode)
    assert calls() == ["a", "saw a"] and calls("send") == ["saw saw a"]
    steps = out["steps"]
    assert steps["1"]["speculative"] is True and steps["2"]["speculative"] is True
    assert "speculative" not in steps["3"] and steps["3"]["output"] == "sent saw saw a"
    assert out["final"]["status"] == "succeeded" and "sent saw saw a" in out["final"]["answer"]
    assert not out.get("speculated")


def test_asked_again_the_request_shows_the_early_results_as_not_approved():
    graph, _ = graph_of(CHAIN)
    config = thread()
    first = ask(graph, config)
    assert first["speculation"] == {"steps": [1, 2], "results": {}}  # asked as they start
    wrong = Command(resume={"action": "approve", "digest": "0" * 64})
    again = graph.invoke(wrong, config, context=SPECULATE)["__interrupt__"][0].value
    assert again["error"]  # refused: asked again, with what already ran
    shown = again["speculation"]["results"]
    assert shown["1"] == {"status": "succeeded", "summary": "saw a", "approved": False}
    assert shown["2"]["summary"] == "saw saw a" and shown["2"]["approved"] is False
    out = graph.invoke(APPROVE, config, context=SPECULATE)
    assert calls() == ["a", "saw a"] and out["steps"]["2"]["speculative"] is True


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_edit_reruns_the_changed_step_and_everything_downstream(mode):
    plan = plan_of(
        step(1, "look", {"x": "a"}),
        step(2, "look", {"x": "$1"}, [1]),
        step(3, "look", {"x": "b"}),
        step(4, "send", {"x": "$2"}, [2]),
    )
    graph, _ = graph_of(plan)
    config = thread()
    asked = ask(graph, config, mode)
    assert sorted(calls()) == ["a", "b", "saw a"]
    edited = {**asked["plan"], "steps": [dict(s) for s in asked["plan"]["steps"]]}
    edited["steps"][0]["args"] = {"x": "z"}
    out = run(graph, Command(resume={"action": "edit", "plan": edited}), config, SPECULATE, mode)
    assert sorted(calls()) == ["a", "b", "saw a", "saw z", "z"]  # b not again; z, $1 anew
    steps = out["steps"]
    assert steps["3"]["speculative"] is True and steps["3"]["output"] == "saw b"
    assert "speculative" not in steps["1"] and steps["1"]["output"] == "saw z"
    assert "speculative" not in steps["2"] and steps["2"]["output"] == "saw saw z"
    assert calls("send") == ["saw saw z"]  # never the stale "saw saw a"
    assert "saw saw a" not in out["final"]["answer"]


def test_an_edit_removes_the_spilled_file_of_a_result_it_does_not_take(tmp_path):
    plan = plan_of(step(1, "big", {"x": "y"}), step(2, "big", {"x": "z"}))
    graph, _ = graph_of(plan)
    config = thread()
    asked = ask(graph, config)
    held = graph.get_state(config).values["speculated"]
    kept, dropped = held["1"]["record"]["output_file"], held["2"]["record"]["output_file"]
    edited = {**asked["plan"], "steps": [dict(s) for s in asked["plan"]["steps"]]}
    edited["steps"][1]["args"] = {"x": "w"}
    out = graph.invoke(
        Command(resume={"action": "edit", "plan": edited}), config, context=SPECULATE
    )
    assert out["steps"]["1"]["speculative"] is True and out["steps"]["1"]["output_file"] == kept
    assert spilled(tmp_path, kept) and not spilled(tmp_path, dropped)
    ran = calls("big")  # 1 and 2 ran at once, in either order; then w, after the approval
    assert sorted(ran[:2]) == ["y", "z"] and ran[2:] == ["w"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_edit_that_swaps_a_read_only_tool_for_a_side_effect_runs_it_after_approval(mode):
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "look", {"x": "$1"}, [1]))
    graph, _ = graph_of(plan)
    config = thread()
    asked = ask(graph, config, mode)
    assert calls() == ["a", "saw a"]
    edited = {**asked["plan"], "steps": [dict(s) for s in asked["plan"]["steps"]]}
    edited["steps"][1]["tool"] = "send"
    answered = time.time()
    out = run(graph, Command(resume={"action": "edit", "plan": edited}), config, SPECULATE, mode)
    assert calls() == ["a", "saw a"] and calls("send") == ["saw a"]
    sent = next(c for c in CALLS if c["tool"] == "send")
    assert sent["start"] >= answered
    assert out["steps"]["1"]["speculative"] is True
    assert "speculative" not in out["steps"]["2"] and out["steps"]["2"]["output"] == "sent saw a"


# 4. Reject and cancel discard every speculative result.
def no(action: str) -> dict[str, str]:
    """A reject (with feedback) or a cancel (with a reason)."""
    return {"action": action, "feedback" if action == "reject" else "reason": "not this"}


def spilled(tmp_path: Path, out_file: dict[str, Any]) -> list[Path]:
    return list(tmp_path.rglob(f"{out_file['id']}.json"))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("action", ["reject", "cancel"])
def test_reject_and_cancel_discard_every_early_result(action, mode, tmp_path):
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "big", {"x": "y"}))
    graph, planner = graph_of(plan, plan_of(step(1, "send", {"x": "other"})))
    config = thread()
    ask(graph, config, mode)
    held = graph.get_state(config).values["speculated"]
    assert sorted(held) == ["1", "2"]
    out_file = held["2"]["record"]["output_file"]
    assert spilled(tmp_path, out_file)  # the large result went to a file
    found = events(graph, Command(resume=no(action)), config, mode)
    assert named(found, "speculation_discarded")[0]["steps"] == [1, 2]
    values = graph.get_state(config).values
    assert not values.get("speculated")
    assert not spilled(tmp_path, out_file)
    assert calls() == ["a"] and calls("big") == ["y"]
    assert not any(r.get("speculative") for r in values["steps"].values())
    if action == "reject":  # the next plan was made without the discarded results
        assert len(planner.prompts) == 2 and "saw a" not in planner.prompts[-1]
        assert "yyyy" not in planner.prompts[-1]
    else:
        assert values["final"]["status"] == "cancelled"


# 5. Crash and resume during review.
LONG_CHAIN = plan_of(
    step(1, "look", {"x": "a"}),
    step(2, "look", {"x": "$1"}, [1]),
    step(3, "look", {"x": "$2"}, [2]),
    step(4, "send", {"x": "$3"}, [3]),
)


def finished_step(sid: int, update: Any) -> bool:
    """Say whether a stream update is the saved result of step ``sid``'s durable task."""
    return isinstance(update, dict) and update.get("id") == sid and "status" in update


async def stop_after_first_early_step(graph: Any, config: dict) -> None:
    """Start a run and leave its stream once the first speculative step's result is saved."""
    stream = graph.astream(
        {"task": "t"}, config, context=SPECULATE, stream_mode=["updates", "custom"]
    )
    async with contextlib.aclosing(stream):
        async for kind, chunk in stream:
            if kind == "updates" and any(finished_step(1, value) for value in chunk.values()):
                break
    await asyncio.sleep(3 * PAUSE)  # the step under way when the run stopped ends on its own
    while abandoned_calls():
        await asyncio.sleep(0.02)


async def streamed(graph: Any, value: Any, config: dict) -> list[dict[str, Any]]:
    stream = graph.astream(value, config, context=SPECULATE, stream_mode="custom")
    return [event async for event in stream]


def test_resumed_during_review_a_finished_early_step_is_not_run_again():
    graph, _ = graph_of(LONG_CHAIN)
    config = thread()

    async def go() -> dict[str, Any]:
        await stop_after_first_early_step(graph, config)
        assert calls() in (["a"], ["a", "saw a"])  # step 2 may have started
        await streamed(graph, None, config)  # resumed: still asking, speculation goes on
        assert sorted(graph.get_state(config).values["speculated"]) == ["1", "2", "3"]
        assert calls().count("a") == 1 and calls().count("saw saw a") == 1
        before = list(calls())
        found = await streamed(graph, APPROVE, config)
        assert calls() == before  # approved: none of them again
        assert not named(found, "speculative_step_started")
        return dict((await graph.aget_state(config)).values)

    values = asyncio.run(go())
    assert calls("send") == ["saw saw saw a"]
    assert all(values["steps"][k]["speculative"] for k in ("1", "2", "3"))


def test_answered_during_speculation_nothing_new_starts_early():
    graph, _ = graph_of(LONG_CHAIN)
    config = thread()

    async def go() -> list[dict[str, Any]]:
        await stop_after_first_early_step(graph, config)
        return await streamed(graph, APPROVE, config)

    found = asyncio.run(go())
    values = graph.get_state(config).values
    assert not named(found, "speculative_step_started")  # nothing starts after the answer
    assert calls().count("a") == 1 and values["steps"]["1"]["speculative"] is True
    assert calls().count("saw saw a") == 1  # step 3 never started early: run once, approved
    assert "speculative" not in values["steps"]["3"]
    assert values["final"]["status"] == "succeeded" and not values.get("speculated")


@pytest.mark.parametrize("action", ["reject", "cancel"])
def test_rejected_during_speculation_nothing_early_is_kept(action, tmp_path):
    graph, _ = graph_of(LONG_CHAIN, plan_of(step(1, "send", {"x": "other"})))
    config = thread()

    async def go() -> list[dict[str, Any]]:
        await stop_after_first_early_step(graph, config)
        return await streamed(graph, Command(resume=no(action)), config)

    found = asyncio.run(go())
    values = graph.get_state(config).values
    assert not values.get("speculated"), values.get("speculated")
    assert named(found, "speculation_discarded")
    assert not any(r.get("speculative") for r in values["steps"].values())


# 6. Every saver, sync and async.
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_speculation_on_every_saver(store, mode, tmp_path, request):
    with savers(store, tmp_path, request) as (sync_saver, async_saver):
        if mode == "sync":
            with sync_saver() as saver:
                graph, _ = graph_of(CHAIN, saver=saver)
                config = thread()
                ask(graph, config, mode)
                assert calls() == ["a", "saw a"]
                out = graph.invoke(APPROVE, config, context=SPECULATE)
        else:

            async def go() -> dict[str, Any]:
                async with async_saver() as saver:
                    graph, _ = graph_of(CHAIN, saver=saver)
                    config = thread()
                    await graph.ainvoke({"task": "t"}, config, context=SPECULATE)
                    assert calls() == ["a", "saw a"]
                    return dict(await graph.ainvoke(APPROVE, config, context=SPECULATE))

            out = asyncio.run(go())
    assert calls() == ["a", "saw a"] and calls("send") == ["saw saw a"]
    assert out["steps"]["1"]["speculative"] and out["steps"]["2"]["speculative"]
    assert out["final"]["status"] == "succeeded"


# 7. Bounded cost.
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_early_steps_keep_to_max_parallel_steps(mode):
    plan = plan_of(*(step(i, "look", {"x": str(i)}) for i in range(1, 4)))
    graph, _ = graph_of(plan)
    ask(graph, thread(), mode, Context(speculate=True, max_parallel_steps=1))
    spans = sorted((c["start"], c["end"]) for c in CALLS)
    assert len(spans) == 3
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def test_early_model_spending_is_counted_apart_and_stops_at_the_budget():
    plan = plan_of(*(step(i, None, {"about": f"part {i}"}) for i in range(1, 4)))
    graph, _ = graph_of(plan, speculate="models")
    config = thread()
    ask(graph, config, context=Context(speculate=False))  # planning alone: what it spends
    spent = graph.get_state(config).values["usage"]["planner"]
    planner_tokens = spent["input_tokens"] + spent["output_tokens"]

    executor = FixedUsage(lock=threading.Lock(), delay=0.05)
    graph, _ = graph_of(plan, speculate="models", executor=executor)
    config = thread()
    limits = Context(speculate=True, max_parallel_steps=1, max_tokens=planner_tokens + 300)
    ask(graph, config, context=limits)
    assert executor.calls == 2  # 200 tokens each: the third call finds the budget spent
    values = graph.get_state(config).values
    assert values["speculation_usage"]["executor"]["calls"] == 2
    assert "executor" not in values["usage"]
    out = graph.invoke(APPROVE, config, context=limits)
    assert executor.calls == 2  # the budget counts the early spending too
    assert out["final"]["status"] == "partial" and out["final"]["budget"]["budget"] == "tokens"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_early_steps_keep_to_the_time_budget_and_their_time_counts(mode):
    plan = plan_of(
        step(1, "slow_look", {"x": "a"}),
        step(2, "slow_look", {"x": "$1"}, [1]),
        step(3, "slow_look", {"x": "b"}),
    )
    graph, _ = graph_of(plan)
    config = thread()
    limits = Context(speculate=True, max_parallel_steps=1, max_seconds=0.2)
    ask(graph, config, mode, limits)
    assert len(CALLS) == 1  # 0.3 s of work spends the 0.2 s: no second step starts early
    assert graph.get_state(config).values["busy_seconds"] >= 0.3  # the run's working time
    out = run(graph, APPROVE, config, limits, mode)
    assert len(CALLS) == 1  # spent before the approval: nothing more starts after it
    assert out["final"]["status"] == "partial" and out["final"]["budget"]["budget"] == "seconds"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_nothing_starts_early_after_the_request_expires(mode):
    """Early steps stop at half the approval window (the rest is the reviewer's)."""
    chain = [step(1, "slow_look", {"x": "a"})]
    chain += [step(n, "slow_look", {"x": f"${n - 1}"}, [n - 1]) for n in range(2, 7)]
    graph, _ = graph_of(plan_of(*chain), approval_expires_after=2.0)  # a window of 2 s
    request = ask(graph, thread(), mode)
    asked = datetime.fromisoformat(request["asked_at"]).timestamp()
    assert 1 <= len(CALLS) <= 4  # 6 steps of 0.3 s, one after the other: 1.8 s for all
    assert all(c["start"] < asked + 1.0 for c in CALLS)  # none after half the window


# 8. Forks and state edits at the approval.
def test_a_state_edit_of_a_read_only_step_is_not_served_its_old_early_result():
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "look", {"x": "b"}))
    graph, _ = graph_of(plan)
    config = thread()
    asked = ask(graph, config)
    assert sorted(calls()) == ["a", "b"]
    edited = {**asked["plan"], "steps": [dict(s) for s in asked["plan"]["steps"]]}
    edited["steps"][0]["args"] = {"x": "c"}
    graph.update_state(config, {"plan": edited})
    again = graph.invoke(None, config, context=SPECULATE)["__interrupt__"][0].value
    answer = {"action": "approve", "digest": again["digest"]}
    out = graph.invoke(Command(resume=answer), config, context=SPECULATE)
    assert out["steps"]["1"]["output"] == "saw c" and out["steps"]["2"]["output"] == "saw b"
    assert "speculative" not in out["steps"]["1"]  # run for the edited plan, once
    assert calls().count("c") == 1 and calls().count("a") == 1


def test_a_fork_at_the_approval_with_an_edited_step_is_not_served_its_old_early_result():
    plan = plan_of(step(1, "look", {"x": "a"}), step(2, "look", {"x": "b"}))
    graph, _ = graph_of(plan)
    config = thread()
    asked = ask(graph, config)
    graph.invoke(APPROVE, config, context=SPECULATE)
    assert sorted(calls()) == ["a", "b"]
    asking = [h for h in graph.get_state_history(config) if "approval" in h.next]
    edited = {**asked["plan"], "steps": [dict(s) for s in asked["plan"]["steps"]]}
    edited["steps"][0]["args"] = {"x": "c"}
    fork = graph.update_state(asking[0].config, {"plan": edited}, as_node="approval")
    again = graph.invoke(None, fork, context=SPECULATE)["__interrupt__"][0].value
    answer = {"action": "approve", "digest": again["digest"]}
    out = graph.invoke(Command(resume=answer), fork, context=SPECULATE)
    assert out["steps"]["1"]["output"] == "saw c"
    assert calls().count("c") == 1 and calls().count("a") == 1


def test_speculative_results_cannot_be_written_into_state():
    graph, _ = graph_of(CHAIN)
    config = thread()
    ask(graph, config)
    forged = {"1": {"key": "k", "version": 1, "record": {"status": "succeeded"}}}
    with pytest.raises(InvalidInputError, match="only feedback, plan, task can be edited"):
        graph.update_state(config, {"speculated": forged})
    with pytest.raises(InvalidInputError, match="only feedback, plan, task can be edited"):
        graph.invoke(Command(update={"speculated": forged}, resume="approve"), config)
    with pytest.raises(InvalidInputError, match="only feedback, plan, task can be edited"):
        graph.update_state(config, {"speculation_usage": {}})
