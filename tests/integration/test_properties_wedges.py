"""Property tests: no tool output, model reply or user input wedges a thread (issue 9, section 2).

Each example runs through the graph and asserts: the run ends or asks again, and the thread
then takes a resume or a new task. The in-memory saver gets many examples; PostgreSQL (JSONB
refuses NUL) gets fewer, each on its own thread of one shared database.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.admission import InvalidInputError
from planexec.llm import models
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.state import FinalResult
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scratch_folder, step
from tests.strategies import examples
from tests.value_strategies import any_text, python_values

returned: list[Any] = [None]


@tool
def given_value() -> Any:
    """Return the value the current example chose."""
    return returned[0]


@tool
def given_error() -> Any:
    """Raise an error whose message is the value the current example chose."""
    raise ValueError(returned[0])


TOOLS = ToolRegistry([given_value, given_error, echo])
CTX = Context(  # no workspace name: each thread works in a folder of its own
    planner_model="scripted",
    executor_model="scripted",
    evaluator_model="scripted",
    max_replans=0,
    retry_initial_interval=0.0,
)
VALUE_PLAN = plan_of(
    step(1, "given_value"),
    step(2, "echo", {"text": "got ${1}"}, [1]),
    step(3, "given_error"),
    step(4, "echo", {"text": "independent"}),
    step(5, None, {"about": "$1"}, [1], expected="a sentence"),
)
ROOT = scratch_folder("planexec-wedges-")
ENDED = {"succeeded", "partial", "failed", "cancelled"}


def serve(*replies: ScriptedReply) -> None:
    model = ScriptedChatModel(replies=list(replies))
    models.load_chat_model = lambda spec, *_: model  # type: ignore[assignment]


@pytest.fixture(scope="module")
def memory_graph() -> Any:
    return build_graph(checkpointer=InMemorySaver(), tools=TOOLS, workspace_root=ROOT)


@pytest.fixture(scope="module")
def postgres_graph(postgres_url: str) -> Iterator[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        yield build_graph(checkpointer=saver, tools=TOOLS, workspace_root=ROOT)


@pytest.fixture(autouse=True)
def _restore_models() -> Iterator[None]:
    original = models.load_chat_model
    yield
    models.load_chat_model = original


def new_config() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def assert_usable(graph: Any, config: dict[str, Any]) -> None:
    """The thread takes a new task and runs it to the end (asking first, as the policy says)."""
    serve(plan_reply(plan_of(step(1, "echo", {"text": "again"}))))
    out = graph.invoke({"task": "a new task"}, config, context=CTX)
    if "__interrupt__" in out:
        assert out["__interrupt__"][0].value["plan"]["steps"][0]["args"] == {"text": "again"}
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=CTX)
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["1"]["output"] == "again"


def run_tool_value(graph: Any, value: Any, executor_text: str) -> FinalResult:
    returned[0] = value
    serve(
        plan_reply(VALUE_PLAN),
        ScriptedReply(content=executor_text, match="You are the executor of planexec"),
    )
    config = new_config()
    graph.invoke({"task": "t"}, config, context=CTX)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=CTX)
    final: FinalResult = out["final"]
    assert final["status"] in ENDED
    assert out["steps"]["3"]["status"] == "failed" and out["steps"]["4"]["status"] == "succeeded"
    state = graph.get_state(config)
    assert state.next == ()
    assert_usable(graph, config)
    return final


def prop(n: int) -> settings:
    return settings(
        max_examples=examples(n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@prop(150)
@given(python_values, any_text)
def test_any_tool_value_ends_the_run_and_leaves_the_thread_usable(memory_graph, value, text):
    run_tool_value(memory_graph, value, text)


@pytest.mark.server
@prop(40)
@given(python_values, any_text)
def test_any_tool_value_on_postgres(postgres_graph, value, text):
    run_tool_value(postgres_graph, value, text)


def run_user_inputs(graph: Any, task: str, extra: Any, feedback: Any, goal: str) -> None:
    config = new_config()
    serve(
        plan_reply({**plan_of(step(1, "echo", {"text": goal})), "goal": goal}),
        plan_reply(plan_of(step(1, "echo", {"text": "revised"}))),
    )
    sent = {"task": task} if extra is None else {"task": task, "notes": extra}
    try:
        asked = graph.invoke(sent, config, context=CTX)
    except InvalidInputError:
        assert not graph.get_state(config).values  # refused before anything was stored
        assert_usable(graph, config)
        return
    assert "__interrupt__" in asked
    try:
        out = graph.invoke(
            Command(resume={"action": "reject", "feedback": feedback}), config, context=CTX
        )
    except InvalidInputError:
        assert graph.get_state(config).next == ("approval",)
        out = graph.invoke(Command(resume={"action": "cancel"}), config, context=CTX)
        assert out["final"]["status"] == "cancelled"
        return
    value = out["__interrupt__"][0].value
    if value["error"] is None:  # the reject was taken: the planner revised the plan
        assert value["plan"]["steps"][0]["args"] == {"text": "revised"}
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=CTX)
    assert out["final"]["status"] in ENDED
    assert_usable(graph, config)


@pytest.mark.server
@prop(40)
@given(any_text, python_values, st.one_of(any_text, st.integers(), st.none()), any_text)
def test_any_input_feedback_or_model_text_on_postgres(postgres_graph, task, extra, feedback, goal):
    run_user_inputs(postgres_graph, task, extra, feedback, goal)
