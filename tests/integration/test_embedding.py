"""planexec inside a parent graph (as a node, or called from a node) and as a tool of an agent.

The parent has its own context schema and state keys named like planexec's bookkeeping
(``error``, ``steps``, ``plan``, ``usage``): planexec reads its settings from the parent
context's ``planexec`` field, its approval interrupt reaches the parent's caller, the
parent's resume finishes the run, and planexec writes only ``messages`` and ``planexec``.
"""

from __future__ import annotations

import contextlib
import operator
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

from planexec import Context, PlanexecSummary, ToolRegistry, as_tool, build_graph
from planexec.context import InvalidContextError, context_of
from planexec.llm.scripted import ScriptedReply
from tests.helpers import echo, plan_of, plan_reply, scripted, step, text_reply

TWO_STEPS = plan_of(
    step(1, "echo", {"text": "hello"}),
    step(2, "echo", {"text": "${1} again"}, deps=[1]),
    goal="Say hello twice",
)


@dataclass
class AppContext:
    """A parent's own context: its fields, and planexec's settings under ``planexec``."""

    user_id: str = "u-1"
    planexec: Context | dict[str, Any] | None = None


class AppTypedContext(TypedDict, total=False):
    """A parent's context as a TypedDict (LangGraph passes it on as a plain dict)."""

    user_id: str
    planexec: dict[str, Any]


class AppModelContext(BaseModel):
    """A parent's context as a pydantic model."""

    user_id: str = "u-1"
    planexec: dict[str, Any] | None = None


class ParentState(TypedDict, total=False):
    """A parent whose own keys share names with planexec's bookkeeping."""

    task: str
    messages: Annotated[list[AnyMessage], add_messages]
    error: bool
    steps: list[str]
    plan: str
    usage: Annotated[int, operator.add]
    planexec: PlanexecSummary
    answer: str


PARENT_KEYS = {"error": False, "steps": ["parent step"], "plan": "the parent's plan", "usage": 3}


def subgraph(planner_replies: int = 1) -> Any:
    """planexec for embedding, with a pinned scripted planner (no model spec is resolved)."""
    planner = scripted(*[plan_reply(TWO_STEPS) for _ in range(planner_replies)])
    return build_graph(tools=ToolRegistry([echo]), models={"planner": planner}, output="embedded")


def as_node(context_schema: type) -> Any:
    parent = StateGraph(ParentState, context_schema=context_schema)
    parent.add_node("planexec", subgraph())
    parent.add_edge(START, "planexec")
    parent.add_edge("planexec", END)
    return parent.compile(checkpointer=InMemorySaver())


def called_from_a_node(context_schema: type) -> Any:
    sub = subgraph()

    def run_planexec(state: ParentState) -> dict[str, Any]:
        out = sub.invoke({"task": state["task"]})
        return {"answer": out["planexec"]["answer"], "planexec": out["planexec"]}

    async def arun_planexec(state: ParentState) -> dict[str, Any]:
        out = await sub.ainvoke({"task": state["task"]})
        return {"answer": out["planexec"]["answer"], "planexec": out["planexec"]}

    parent = StateGraph(ParentState, context_schema=context_schema)
    parent.add_node("work", RunnableLambda(run_planexec, afunc=arun_planexec))
    parent.add_edge(START, "work")
    parent.add_edge("work", END)
    return parent.compile(checkpointer=InMemorySaver())


def config() -> Any:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


async def run(graph: Any, value: Any, cfg: Any, context: Any, mode: str) -> dict[str, Any]:
    if mode == "sync":
        return graph.invoke(value, cfg, context=context)  # type: ignore[no-any-return]
    return await graph.ainvoke(value, cfg, context=context)  # type: ignore[no-any-return]


CONTEXTS = {
    "dataclass with a Context": lambda: AppContext(planexec=Context(retry_initial_interval=0.01)),
    "dataclass with a dict": lambda: AppContext(planexec={"retry_initial_interval": 0.01}),
    "dataclass without planexec": lambda: AppContext(),
    "typed dict with a dict": lambda: {"user_id": "u-1", "planexec": {"max_steps": 5}},
    "typed dict without planexec": lambda: {"user_id": "u-1"},
    "pydantic model with a dict": lambda: AppModelContext(planexec={"max_replans": 1}),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("shape", ["node", "called from a node"])
@pytest.mark.parametrize("context_name", list(CONTEXTS))
async def test_planexec_in_a_parent_graph_asks_the_parent_and_leaves_its_keys_alone(
    mode, shape, context_name
):
    context = CONTEXTS[context_name]()
    schema = AppTypedContext if isinstance(context, dict) else type(context)
    parent = as_node(schema) if shape == "node" else called_from_a_node(schema)
    cfg = config()

    first = await run(parent, {"task": "Say hello twice", **PARENT_KEYS}, cfg, context, mode)
    [pending] = first["__interrupt__"]
    request = pending.value
    assert request["type"] == "plan_approval"
    assert request["plan"]["goal"] == "Say hello twice"
    answer = {"action": "approve", "digest": request["digest"]}

    done = await run(parent, Command(resume=answer), cfg, context, mode)
    assert "__interrupt__" not in done
    for key, value in PARENT_KEYS.items():
        assert done[key] == value, key  # the parent's own keys, untouched
    summary = done["planexec"]
    assert summary["status"] == "succeeded", summary
    assert "hello again" in summary["answer"]
    assert summary["task"] == "Say hello twice"
    assert summary["error"] is None
    assert summary["plan"] is not None
    assert summary["plan"]["goal"] == "Say hello twice"
    assert summary["plan"]["digest"] == request["digest"]
    assert summary["plan"]["version"] == 1
    assert [(s["id"], s["tool"]) for s in summary["plan"]["steps"]] == [(1, "echo"), (2, "echo")]
    assert summary["failed_steps"] == []
    if shape == "node":
        assert isinstance(done["messages"][0], HumanMessage)
        assert "hello again" in done["messages"][-1].content  # planexec's answer, in the chat
    else:
        assert "hello again" in done["answer"]
    assert set(parent.get_state(cfg).values) <= set(ParentState.__annotations__)


def test_the_standalone_graph_keeps_its_full_output():
    graph = build_graph(
        checkpointer=InMemorySaver(),
        tools=ToolRegistry([echo]),
        models={"planner": scripted(plan_reply(TWO_STEPS))},
    )
    cfg = config()
    graph.invoke({"task": "t"}, cfg, context=Context(retry_initial_interval=0.01))
    out = graph.invoke(Command(resume={"action": "approve"}), cfg)
    assert {"task", "plan", "steps", "approval", "final", "usage", "error"} <= set(out)
    assert "planexec" not in out


def test_the_parent_context_settings_reach_planexec():
    """The parent's ``planexec`` settings are the run's: one step allowed, no repairs."""
    parent = as_node(AppContext)
    context = AppContext(planexec={"max_steps": 1, "max_plan_repairs": 0})
    done = parent.invoke({"task": "Say hello twice", **PARENT_KEYS}, config(), context=context)
    assert "__interrupt__" not in done  # the plan was refused: nothing to approve
    assert done["planexec"]["status"] == "failed"
    assert "at most 1 are allowed" in (done["planexec"]["error"] or "")
    assert done["error"] is False


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (AppContext(planexec={"max_steps": "5"}), "max_steps"),
        ({"planexec": {"max_steps": 0}}, "max_steps"),
        (AppContext(planexec=5), "a planexec Context or a dict of its fields"),  # type: ignore[arg-type]
        ({"planexec": "always"}, "a planexec Context or a dict of its fields"),
        ({"user_id": "u-1", "max_steps": 3}, "under a 'planexec' key"),
    ],
    ids=["dataclass, wrong value", "dict, wrong value", "not settings", "text", "mixed dict"],
)
def test_wrong_planexec_settings_in_a_parent_context_are_refused_clearly(context, message):
    schema = AppTypedContext if isinstance(context, dict) else AppContext
    parent = as_node(schema)
    saver = parent.checkpointer
    with pytest.raises(InvalidContextError, match=message):
        parent.invoke({"task": "Say hello twice", **PARENT_KEYS}, config(), context=context)
    nested = [c for c in saver.list(None) if c.config["configurable"]["checkpoint_ns"]]
    assert nested == []  # refused before planexec's first node ran
    with pytest.raises(InvalidContextError, match=message):
        context_of(context)


def test_context_of_reads_every_accepted_form():
    given = Context(max_steps=7)
    assert context_of(given) is given
    assert context_of(None) == Context()
    assert context_of({"max_steps": 7}).max_steps == 7
    assert context_of({}) == Context()
    assert context_of({"planexec": {"max_steps": 7}, "user_id": "u"}).max_steps == 7
    assert context_of({"planexec": given}) is given
    assert context_of({"planexec": None}) == Context()
    assert context_of(AppContext(planexec=given)) is given
    assert context_of(AppContext(planexec={"max_steps": 7})).max_steps == 7
    assert context_of(AppContext()) == Context()
    assert context_of({"user_id": "u"}) == Context()
    with pytest.raises(InvalidContextError, match="max_step"):
        context_of({"planexec": {"max_step": 7}})


# -- as a tool of create_agent --------------------------------------------------------------


def agent(context_schema: type | None = None) -> Any:
    """An agent whose scripted model calls planexec's tool once, then answers."""
    call = {"name": "plan_and_run", "args": {"task": "Say hello twice"}, "id": "call-plan"}
    model = scripted(ScriptedReply(tool_calls=[call]), text_reply("Done: it said hello twice."))
    tool = as_tool(subgraph(), name="plan_and_run")
    return create_agent(model, [tool], checkpointer=InMemorySaver(), context_schema=context_schema)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_planexec_as_a_create_agent_tool_asks_the_agents_caller(mode):
    graph = agent(AppContext)
    cfg = config()
    context = AppContext(planexec={"retry_initial_interval": 0.01})
    ask = {"messages": [{"role": "user", "content": "Say hello twice, please"}]}

    first = await run(graph, ask, cfg, context, mode)
    [pending] = first["__interrupt__"]
    assert pending.value["type"] == "plan_approval"
    assert pending.value["plan"]["goal"] == "Say hello twice"

    done = await run(graph, Command(resume={"action": "approve"}), cfg, context, mode)
    assert "__interrupt__" not in done
    [tool_message] = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.name == "plan_and_run"
    assert "hello again" in tool_message.content
    assert tool_message.artifact["status"] == "succeeded"
    assert tool_message.artifact["plan"]["goal"] == "Say hello twice"
    assert isinstance(done["messages"][-1], AIMessage)
    assert done["messages"][-1].content == "Done: it said hello twice."


def test_the_tool_describes_itself_and_takes_a_task():
    tool = as_tool(subgraph())
    assert tool.name == "plan_and_run"
    assert "plan" in tool.description.lower()
    assert set(tool.args) == {"task"}


def test_the_tool_reads_the_agents_context():
    """The tool's run reads the agent's context, like a node's run reads its parent's."""
    graph = agent(AppContext)
    context = AppContext(planexec={"max_steps": 1, "max_plan_repairs": 0})
    done = graph.invoke(
        {"messages": [{"role": "user", "content": "Say hello twice"}]}, config(), context=context
    )
    assert "__interrupt__" not in done
    [tool_message] = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.artifact["status"] == "failed"


class ParentWithADocument(ParentState, total=False):
    """A parent that also keeps a big text of its own (more than planexec takes as input)."""

    document: str


def test_the_admission_gate_checks_only_what_planexec_reads_from_the_parent():
    parent = StateGraph(ParentWithADocument, context_schema=AppContext)
    parent.add_node("planexec", subgraph())
    parent.add_edge(START, "planexec")
    parent.add_edge("planexec", END)
    graph = parent.compile(checkpointer=InMemorySaver())
    cfg = config()
    big = {"task": "Say hello twice", "document": "x" * 1_200_000}
    first = graph.invoke(big, cfg, context=AppContext())
    assert first["__interrupt__"][0].value["type"] == "plan_approval"
    done = graph.invoke(Command(resume={"action": "approve"}), cfg, context=AppContext())
    assert done["planexec"]["status"] == "succeeded"
    assert len(done["document"]) == 1_200_000


def test_each_visit_of_the_node_is_a_fresh_run_on_the_parents_task():
    parent = StateGraph(ParentState, context_schema=AppContext)
    parent.add_node("planexec", subgraph(planner_replies=2))
    parent.add_edge(START, "planexec")
    parent.add_edge("planexec", END)
    graph = parent.compile(checkpointer=InMemorySaver())
    cfg = config()
    for task in ("Say hello twice", "Say hello twice again"):
        asked = graph.invoke({"task": task}, cfg, context=AppContext())
        assert asked["__interrupt__"][0].value["type"] == "plan_approval"
        done = graph.invoke(Command(resume={"action": "approve"}), cfg, context=AppContext())
        assert done["planexec"]["task"] == task
        assert done["planexec"]["status"] == "succeeded"
        assert done["planexec"]["plan"]["version"] == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_parent_on_sqlite_runs_planexec_without_lock_trouble(mode, tmp_path):
    """The parent's run holds the thread; planexec nested in it takes no lock of its own."""
    from planexec.storage import persistence

    db = tmp_path / "runs.sqlite"
    opened = persistence.sqlite_saver(db) if mode == "sync" else persistence.async_sqlite_saver(db)
    async with contextlib.AsyncExitStack() as stack:
        if mode == "sync":
            saver = stack.enter_context(opened)
        else:
            saver = await stack.enter_async_context(opened)
        for make in (as_node, called_from_a_node):
            graph = make(AppContext).builder.compile(checkpointer=saver)
            cfg = config()
            first = await run(graph, {"task": "Say hello twice"}, cfg, AppContext(), mode)
            assert first["__interrupt__"][0].value["type"] == "plan_approval"
            answer = Command(resume={"action": "approve"})
            done = await run(graph, answer, cfg, AppContext(), mode)
            assert done["planexec"]["status"] == "succeeded"


def test_the_tool_outside_a_graph_says_the_approval_needs_one():
    from planexec.embedding import ApprovalOutsideGraphError

    tool = as_tool(subgraph())
    with pytest.raises(ApprovalOutsideGraphError, match="checkpointer"):
        tool.invoke({"task": "Say hello twice"}, config())
    with pytest.raises(ApprovalOutsideGraphError, match="checkpointer"):  # nor a thread id
        as_tool(subgraph()).invoke({"task": "Say hello twice"})


# -- a parent's context with planexec's settings misspelt (hostile review) -------------------


@dataclass
class MisspeltParentContext:
    """A parent's context whose ``planexec`` field is misspelt."""

    user_id: str = "u-1"
    planexc: dict[str, Any] | None = None


@dataclass
class FlatParentContext:
    """A parent's context that gives a planexec setting as a field of its own."""

    user_id: str = "u-1"
    approval: str = "always"


class MisspeltParentModel(BaseModel):
    """A pydantic parent context with a setting misspelt as its own field."""

    user_id: str = "u-1"
    approvall: str = "always"


@pytest.mark.parametrize("shape", ["node", "called from a node"])
@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"planexc": {"approval": "always"}, "user_id": "u-1"},
            "planexc: did you mean planexec?; a parent graph gives planexec's settings under a "
            "'planexec' key",
        ),
        ({"user_id": "u-1", "approvall": "always"}, "approvall: did you mean approval?"),
        (MisspeltParentContext(planexc={"approval": "always"}), "planexc: did you mean planexec?"),
        (MisspeltParentModel(), "approvall: did you mean approval?"),
        (FlatParentContext(), "planexec's fields (approval)"),
        ({f"k{i}": 1 for i in range(1_000)}, "1,000 keys"),
    ],
    ids=["dict planexc", "dict approvall", "dataclass", "pydantic", "flat dataclass", "huge"],
)
def test_planexec_settings_misspelt_in_a_parent_context_are_refused_naming_them(
    shape, context, message
):
    schema = AppTypedContext if isinstance(context, dict) else type(context)
    parent = as_node(schema) if shape == "node" else called_from_a_node(schema)
    with pytest.raises(InvalidContextError) as caught:
        parent.invoke({"task": "Say hello twice", **PARENT_KEYS}, config(), context=context)
    assert message in str(caught.value)
    assert len(str(caught.value)) < 600
    nested = [
        c for c in parent.checkpointer.list(None) if c.config["configurable"]["checkpoint_ns"]
    ]
    assert nested == []  # refused before planexec's first node ran


def test_a_foreign_parent_context_with_nothing_like_planexecs_settings_runs_on_the_defaults():
    assert context_of(SimpleNamespace(user_id="u-1", model="m")) == Context()
    assert context_of({"user_id": "u-1", "approvals_queue": "q"}) == Context()


# -- near-miss keys of a parent's context: case, affixes, slots (hostile review 2) ------------


class SlotsParentContext:
    """A parent's context with ``__slots__`` (no ``__dict__``) and a misspelt setting."""

    __slots__ = ("user_id",)

    def __init__(self) -> None:
        self.user_id = "u-1"


class MisspeltSlotsParentContext(SlotsParentContext):
    """Its subclass: the misspelt setting is a slot of the subclass only."""

    __slots__ = ("aproval",)

    def __init__(self) -> None:
        super().__init__()
        self.aproval = "never"


class CaseParentContext:
    """A parent's context object giving planexec's settings under ``PlanExec``."""

    def __init__(self) -> None:
        self.user_id = "u-1"
        self.PlanExec = {"approval": "never"}


class AffixParentModel(BaseModel):
    """A pydantic parent context with a setting named with a word added to it."""

    user_id: str = "u-1"
    approval_policy: str = "never"


@pytest.mark.parametrize("shape", ["node", "called from a node"])
@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"PlanExec": {"max_steps": -5}}, "PlanExec: did you mean planexec?"),
        ({"PLANEXEC": {"max_steps": -5}, "user_id": "u"}, "PLANEXEC: did you mean planexec?"),
        ({"planexec_settings": {"max_steps": -5}}, "planexec_settings: did you mean planexec?"),
        ({"myPlanexec": {"max_steps": -5}}, "myPlanexec: did you mean planexec?"),
        ({"user_id": "u", "approval_policy": "never"}, "approval_policy: did you mean approval?"),
        ({"user_id": "u", "my_max_steps": 3}, "my_max_steps: did you mean max_steps?"),
        ({"user_id": "u", "maxStepsLimit": 3}, "maxStepsLimit: did you mean max_steps?"),
        ({"user_id": "u", "MAX_STEPS": 3}, "MAX_STEPS: did you mean max_steps?"),
        ({"user_id": "u", "Approval": "never"}, "Approval: did you mean approval?"),
        ({"user_id": "u", "maxCost": 1}, "maxCost: did you mean max_cost?"),
        (MisspeltSlotsParentContext(), "aproval: did you mean approval?"),
        (CaseParentContext(), "PlanExec: did you mean planexec?"),
        (AffixParentModel(), "approval_policy: did you mean approval?"),
    ],
    ids=[
        "PlanExec",
        "PLANEXEC",
        "planexec_settings",
        "myPlanexec",
        "approval_policy",
        "my_max_steps",
        "maxStepsLimit",
        "MAX_STEPS",
        "Approval",
        "maxCost",
        "slots",
        "object PlanExec",
        "pydantic approval_policy",
    ],
)
def test_near_miss_keys_of_a_parent_context_are_refused_not_run_on_the_defaults(
    shape, context, message
):
    schema = AppTypedContext if isinstance(context, dict) else type(context)
    parent = as_node(schema) if shape == "node" else called_from_a_node(schema)
    with pytest.raises(InvalidContextError) as caught:
        parent.invoke({"task": "Say hello twice", **PARENT_KEYS}, config(), context=context)
    assert message in str(caught.value)
    assert "under a 'planexec' key" in str(caught.value)
    assert len(str(caught.value)) < 600
    nested = [
        c for c in parent.checkpointer.list(None) if c.config["configurable"]["checkpoint_ns"]
    ]
    assert nested == []  # refused before planexec's first node ran


ORDINARY_PARENT_KEYS = {
    "user_id": "u-1",
    "model": "m",
    "messages": [],
    "thread": "t",
    "timeout": 5,
    "max_retries": 2,
    "plans": [],
    "approvals_queue": "q",
    "model_name": "m",
    "planner": "p",
    "steps": 3,
    "memory": True,
    "workspace_id": "w",
    "userId": "u",
}


@pytest.mark.parametrize("shape", ["node", "called from a node"])
def test_a_parent_context_of_ordinary_keys_runs_planexec_on_its_defaults(shape):
    parent = as_node(AppTypedContext) if shape == "node" else called_from_a_node(AppTypedContext)
    out = parent.invoke(
        {"task": "Say hello twice", **PARENT_KEYS}, config(), context=dict(ORDINARY_PARENT_KEYS)
    )
    assert out["__interrupt__"][0].value["type"] == "plan_approval"  # the default policy asks
    assert context_of(SlotsParentContext()) == Context()
    assert context_of(SimpleNamespace(**ORDINARY_PARENT_KEYS)) == Context()


def test_a_parent_with_a_planexec_key_may_keep_keys_named_like_planexecs_fields():
    """``planexec: None`` is the defaults, and says the parent's other keys are its own."""
    assert context_of({"planexec": None, "approval_policy": "x", "my_max_steps": 1}) == Context()
    with pytest.raises(InvalidContextError, match="PlanExec: did you mean planexec?"):
        context_of({"planexec": None, "PlanExec": {"max_steps": 3}})


@pytest.mark.parametrize("shape", ["node", "called from a node"])
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"planner_timeouts": {"conect": 5}},
            "planner_timeouts.conect: unknown field (did you mean connect?)",
        ),
        (
            {"model_prices": {"openai:x": {"inptu": 1.0, "output": 2.0}}},
            "model_prices.openai:x.inptu: unknown field (did you mean input?)",
        ),
    ],
    ids=["timeouts", "prices"],
)
def test_a_misspelt_key_inside_a_setting_is_named_by_its_path(shape, settings, message):
    parent = as_node(AppTypedContext) if shape == "node" else called_from_a_node(AppTypedContext)
    context = {"user_id": "u-1", "planexec": settings}
    with pytest.raises(InvalidContextError) as caught:
        parent.invoke({"task": "Say hello twice", **PARENT_KEYS}, config(), context=context)
    assert message in str(caught.value)
