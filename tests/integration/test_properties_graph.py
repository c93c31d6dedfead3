"""Property tests through the whole graph: malformed planner replies and resume answers."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.admission import InvalidInputError
from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.plan import PlanValidationError, validate_plan
from planexec.review.decisions import Reject, read_decision
from planexec.tools import ToolRegistry
from tests.helpers import (
    always_fails,
    echo,
    plan_of,
    plan_reply,
    scratch_folder,
    sleep_for,
    step,
)
from tests.strategies import examples, planner_replies, resume_answers

TOOLS = ToolRegistry([echo, sleep_for, always_fails])
GRAPH = build_graph(
    checkpointer=InMemorySaver(),
    tools=TOOLS,
    workspace_root=scratch_folder("planexec-prop-"),
)
CTX = Context(
    planner_model="scripted",
    max_plan_repairs=2,
    max_steps=30,
)
GOOD = plan_of(step(1, "echo", {"text": "hi"}), step(2, "echo", {"text": "$1"}, [1]))


def serve(*replies: ScriptedReply) -> ScriptedChatModel:
    model = ScriptedChatModel(replies=list(replies))
    models.load_chat_model = lambda spec, *_: model  # type: ignore[assignment]
    return model


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(planner_replies, min_size=3, max_size=3))
def test_any_planner_replies_end_in_a_valid_plan_or_a_clear_error(replies):
    original = models.load_chat_model
    try:
        serve(*[ScriptedReply.model_validate(r) for r in replies])
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = GRAPH.invoke({"task": "do it"}, config, context=CTX)  # must not raise
        if "__interrupt__" in out:
            plan = out["__interrupt__"][0].value["plan"]
            validate_plan({"goal": plan["goal"], "steps": plan["steps"]}, TOOLS, max_steps=30)
        else:
            assert out["final"]["status"] == "failed"
            assert out["error"].startswith("the planner gave no valid plan in 3 attempts")
        # the thread stays usable: a new task on it plans again
        serve(plan_reply(GOOD))
        again = GRAPH.invoke({"task": "again"}, config, context=CTX)
        assert "__interrupt__" in again or again["final"]["status"] == "failed"
    finally:
        models.load_chat_model = original


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resume_answers)
def test_any_resume_answer_runs_or_is_refused_with_the_plan_unchanged(answer):
    original = models.load_chat_model
    try:
        serve(plan_reply(GOOD), plan_reply(GOOD))  # a reject asks the planner again
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        asked = GRAPH.invoke({"task": "t"}, config, context=CTX)["__interrupt__"][0].value
        try:
            out = GRAPH.invoke(Command(resume=answer), config, context=CTX)
        except InvalidInputError as exc:  # an answer no checkpoint can store: refused up front
            assert "cannot be stored" in str(exc) or "carries nothing" in str(exc)
            state = GRAPH.get_state(config)
            assert state.next == ("approval",)
            assert state.values["plan"] == asked["plan"]
            assert state.interrupts[0].value["plan"] == asked["plan"]
            done = GRAPH.invoke(Command(resume={"action": "cancel"}), config, context=CTX)
            assert done["final"]["status"] == "cancelled"  # the thread is still usable
            return
        if "__interrupt__" in out:
            value = out["__interrupt__"][0].value
            if value["version"] == 2:  # a reject: the planner revised the plan and asks again
                decision = read_decision(answer)
                assert isinstance(decision, Reject) and not value["error"]
                revision = GRAPH.get_state(config).values["revisions"][-1]
                assert revision["reason"] == f"rejected by the reviewer: {decision.feedback}"
            else:  # refused (or, for {}, not delivered by LangGraph): asked again, unchanged
                assert value["plan"] == asked["plan"]
        else:
            assert out["final"]["status"] in {"succeeded", "partial", "failed", "cancelled"}
            if isinstance(answer, dict) and answer.get("action") == "edit":
                try:
                    validate_plan(answer.get("plan"), TOOLS, max_steps=30)
                except PlanValidationError as exc:
                    raise AssertionError("an invalid edit was run") from exc
    finally:
        models.load_chat_model = original
