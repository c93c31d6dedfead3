"""What a caller sends is refused before LangGraph stores it, and the thread stays usable."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, scripted, step, thread
from tests.integration.test_tracing import Recorder

TOOLS = ToolRegistry([echo])


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


GOOD = plan_of(step(1, "echo", {"text": "hi"}))
UNSTORABLE = [
    {"action": "approve", "x": 2**64},
    {"action": "approve", "plan": {"goal": None, "steps": [{"tool": -(2**63) - 1}]}},
    {"action": "reject", "feedback": "no\x00pe"},
    {"action": "reject", "feedback": "\ud800"},
    {"action": "approve", "deep": nested(100)},
]


@pytest.mark.parametrize("answer", UNSTORABLE, ids=["int64+", "int64-", "nul", "surrogate", "deep"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_an_unstorable_resume_answer_is_refused_and_the_thread_stays_usable(
    answer, durability, use_models, ctx
):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    asked = graph.invoke({"task": "t"}, config, context=ctx(), durability=durability)
    before = graph.get_state(config)

    with pytest.raises(InvalidInputError, match="cannot be stored"):
        graph.invoke(Command(resume=answer), config, context=ctx(), durability=durability)

    after = graph.get_state(config)
    assert after.next == ("approval",) and after.config == before.config
    assert after.values.get("steps") == before.values.get("steps")  # nothing ran
    assert after.interrupts[0].value["plan"] == asked["__interrupt__"][0].value["plan"]
    done = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert done["final"]["status"] == "succeeded"


async def test_async_callers_are_refused_the_same_way(use_models, ctx):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    await graph.ainvoke({"task": "t"}, config, context=ctx())
    with pytest.raises(InvalidInputError, match="integer outside the 64-bit range"):
        await graph.ainvoke(Command(resume={"action": "approve", "n": 2**70}), config)
    done = await graph.ainvoke(Command(resume="approve"), config, context=ctx())
    assert done["final"]["status"] == "succeeded"


@pytest.mark.parametrize(
    "value",
    [{}, {"task": ""}, {"task": 5}, {"task": "a\x00b"}, {"task": "x" * 20_001}, "just text"],
    ids=["no-task", "empty", "not-text", "nul", "too-long", "not-a-dict"],
)
def test_a_bad_input_is_refused_with_one_clear_message(value, ctx):
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    with pytest.raises(InvalidInputError) as caught:
        graph.invoke(value, config, context=ctx())
    assert "task" in str(caught.value) or "cannot be stored" in str(caught.value)
    assert not graph.get_state(config).values  # nothing was stored


def test_state_edits_that_cannot_be_stored_are_refused(use_models, ctx):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": "t"}, config, context=ctx())
    before = graph.get_state(config)
    with pytest.raises(InvalidInputError, match="NUL"):
        graph.update_state(config, {"feedback": "bad\x00"})
    assert graph.get_state(config).config == before.config


def test_an_empty_command_is_refused(use_models, ctx):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": "t"}, config, context=ctx())
    with pytest.raises(InvalidInputError, match="carries nothing"):
        graph.invoke(Command(resume=None), config, context=ctx())
    assert graph.get_state(config).next == ("approval",)


BIG = "x" * 1_000_001


@pytest.mark.parametrize(
    "send",
    [
        lambda g, c: g.invoke({"messages": [{"role": "user", "content": BIG}, "ok"]}, c),
        lambda g, c: g.invoke(Command(resume={"action": "approve", "junk": BIG}), c),
        lambda g, c: g.invoke(Command(resume={"action": "reject", "feedback": "x" * 20_001}), c),
        lambda g, c: g.update_state(c, {"feedback": "x" * 20_001}),
        lambda g, c: g.update_state(c, {"task": "x" * 20_001}),
    ],
)
def test_oversized_inputs_answers_and_edits_are_refused(send, use_models, ctx):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    before = graph.get_state(config)
    try:
        out = send(graph, config)
    except InvalidInputError as exc:
        assert "characters" in str(exc)
    else:  # an answer too long to be feedback: refused by the approval and asked again
        assert "at most 20,000" in out["__interrupt__"][0].value["error"]
    after = graph.get_state(config)
    assert after.values["plan"] == before.values["plan"] and after.next == ("approval",)


TOKEN = "tok-SERVICE-0987654321"
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in TOKEN[:3]) + TOKEN[3:]
"""The secret as JSON text may write it: escaped, so the raw text does not hold it."""
FAILING = plan_of({**step(1, "always_fails", {"reason": "x"}), "on_failure": "ask"})


def secret_kept(graph: Any, saver: InMemorySaver, recorder: Any, config: Any) -> list[str]:
    """Where the secret is: the thread's state, its checkpoints, the run's trace."""
    found = []
    if TOKEN in json.dumps(graph.get_state(config).values, default=str):
        found.append("state")
    if TOKEN.encode() in repr((saver.storage, saver.writes, saver.blobs)).encode():
        found.append("checkpoint")
    for run in recorder.runs:
        if TOKEN in json.dumps([run.inputs, run.outputs, run.error], default=str):
            found.append(f"trace ({run.name})")
    return found


def reject_text() -> str:
    return '{"action": "reject", "feedback": "shorter, not ' + ESCAPED + '"}'


def edit_steps_text(plan: dict[str, Any]) -> dict[str, Any]:
    steps = '[{"id": 1, "tool": "echo", "args": {"text": "' + ESCAPED + '"}}]'
    edited = {"name": "run_plan", "args": {"goal": plan["goal"], "steps": steps}}
    return {"decisions": [{"type": "edit", "edited_action": edited}]}


def failure_args_text(_: Any) -> dict[str, Any]:
    args = '{"reason": "' + ESCAPED + '"}'
    edited = {"name": "retry_failed_step", "args": {"args": args}}
    return {"decisions": [{"type": "edit", "edited_action": edited}]}


ANSWERS = {
    "reject feedback": (GOOD, lambda plan: reject_text()),
    "edit as text, its steps as text in it": (GOOD, lambda plan: json.dumps(edit_steps_text(plan))),
    "edited steps": (GOOD, edit_steps_text),
    "failure args": (FAILING, failure_args_text),
}


@pytest.mark.parametrize("kind", list(ANSWERS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_secret_in_an_answer_sent_as_json_text_is_kept_nowhere(
    kind, mode, use_models, ctx, monkeypatch
):
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    plan, answer_to = ANSWERS[kind]
    use_models(planner=scripted(plan_reply(plan), plan_reply(GOOD)))
    saver = InMemorySaver()
    graph = build_graph(checkpointer=saver, tools=ToolRegistry([echo, always_fails]))
    recorder = Recorder()
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, "callbacks": [recorder]}
    run_ctx = ctx(max_replans=1, retry_initial_interval=0.0)
    first: dict[str, Any] = {"action": "approve"}

    async def arun() -> dict[str, Any]:
        out = await graph.ainvoke({"task": "t"}, config, context=run_ctx)
        if plan is FAILING:
            out = await graph.ainvoke(Command(resume=first), config, context=run_ctx)
        answer = answer_to(out["__interrupt__"][0].value.get("plan"))
        assert TOKEN not in json.dumps(answer)
        return await graph.ainvoke(Command(resume=answer), config, context=run_ctx)

    def run() -> dict[str, Any]:
        out = graph.invoke({"task": "t"}, config, context=run_ctx)
        if plan is FAILING:
            out = graph.invoke(Command(resume=first), config, context=run_ctx)
        answer = answer_to(out["__interrupt__"][0].value.get("plan"))
        assert TOKEN not in json.dumps(answer)
        return graph.invoke(Command(resume=answer), config, context=run_ctx)

    out = asyncio.run(arun()) if mode == "async" else run()
    decisions = graph.get_state(config).values["decisions"]
    assert decisions[-1]["action"] != "refused", decisions[-1]  # the answer was taken
    assert secret_kept(graph, saver, recorder, config) == [], out
    assert "[redacted]" in json.dumps(graph.get_state(config).values, default=str)


@pytest.mark.parametrize("how", ["update_state", "command", "aupdate_state"])
def test_a_secret_in_a_state_edit_is_kept_nowhere(how, use_models, ctx, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", TOKEN)
    use_models(planner=scripted(plan_reply(GOOD), plan_reply(GOOD)))
    saver = InMemorySaver()
    graph = build_graph(checkpointer=saver, tools=TOOLS)
    recorder = Recorder()
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, "callbacks": [recorder]}
    graph.invoke({"task": "t"}, config, context=ctx())
    edit = {"feedback": f"shorter, not {TOKEN}", "task": f"t with {ESCAPED}"}
    if how == "update_state":
        graph.update_state(config, edit)
        graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    elif how == "aupdate_state":
        asyncio.run(graph.aupdate_state(config, edit))
        graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    else:
        graph.invoke(Command(resume={"action": "approve"}, update=edit), config, context=ctx())
    values = graph.get_state(config).values
    assert values["feedback"] == "shorter, not [redacted]"
    assert values["task"] == f"t with {ESCAPED}"  # not JSON text: kept as written
    assert secret_kept(graph, saver, recorder, config) == []
