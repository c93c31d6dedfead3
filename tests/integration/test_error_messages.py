"""Errors name the thing: the endpoint a connection failed to, the folder a file was looked for
in, and an approval answer that is not one, explained in planexec's words (issue 33)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import ConfigurationError, ProviderError
from planexec.tools import ToolRegistry, default_registry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread
from tests.servers import free_port

# --- the endpoint a connection failed to ------------------------------------------------------


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_a_provider_nobody_answers_for_is_named_by_its_endpoint(monkeypatch, ctx, how):
    """A bad OPENAI_BASE_URL (a closed port) through the real client: the error names the URL
    the client tried, without the password or user of the URL."""
    port = free_port()
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://alice:hunter2-pass-word@127.0.0.1:{port}/v1")
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    run = ctx(planner_model="openai:planner", planner_timeouts={"total": 20.0})
    with pytest.raises(ProviderError) as raised:
        if how == "invoke":
            graph.invoke({"task": "t"}, thread(), context=run)
        else:
            asyncio.run(graph.ainvoke({"task": "t"}, thread(), context=run))
    said = str(raised.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in said
    assert "hunter2" not in said and "alice" not in said
    assert "after 3 tries" in said


@pytest.mark.parametrize("url", ["localhost:8000/v1", "http://127.0.0.1:99999/v1"])
def test_a_base_url_no_client_can_call_is_refused_naming_the_setting(monkeypatch, ctx, url):
    """No scheme, or a port out of range: a one-line ConfigurationError naming the setting,
    not the client's "Connection error." three times (or a crash inside its connection code)."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    with pytest.raises(ConfigurationError, match=f"OPENAI_BASE_URL '{url}' is not a server's URL"):
        graph.invoke({"task": "t"}, thread(), context=ctx(planner_model="openai:planner"))


# --- the folder a file was looked for in ------------------------------------------------------


def test_a_missing_file_names_the_workspace_folder(use_models, ctx, workspace):
    plan = plan_of(step(1, "read_file", {"path": "nope.txt"}))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=default_registry())
    config, run = thread(), ctx(max_replans=0, step_max_attempts=1)
    graph.invoke({"task": "read nope.txt"}, config, context=run)
    out = graph.invoke(Command(resume="approve"), config, context=run)
    error = out["steps"]["1"]["error"]
    assert f"'nope.txt' does not exist in the workspace {workspace.resolve()}" in error


# --- approval answers in planexec's words -----------------------------------------------------

PLAN = plan_of(step(1, "echo", {"text": "one"}))
ACCEPTED = ('"approve"', '"edit"', '"plan"', '"reject"', '"feedback"', '"cancel"', '"reason"')
PYDANTIC = ("Input should be", "validation error for", "Field required", "discriminator",
            "Input tag", "Extra inputs", "String should")  # fmt: skip

MALFORMED: dict[str, tuple[Any, tuple[str, ...]]] = {
    "misspelt action": ({"action": "aprove"}, ("'aprove' is not an action", "'approve'")),
    "edit without a plan": ({"action": "edit"}, ('an edit needs "plan"',)),
    "no action, a number for digest": ({"digest": 5}, ('no "action"',)),
    "a digest that is a number": (
        {"action": "approve", "digest": 5},
        ('"digest" must be text', "not a number"),
    ),
    "a list": (["approve"], ("a list",)),
    "free text": ("yes please", ("'yes please' is not an action",)),
    "blank feedback": ({"action": "reject", "feedback": "  "}, ('"feedback" is blank',)),
    "an unknown field": ({"action": "cancel", "why": "x"}, ('a cancel has no "why"',)),
    "a plan that is text": ({"action": "edit", "plan": "x"}, ('"plan" must be an object',)),
}


@pytest.fixture
def graph():
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


@pytest.mark.parametrize(("answer", "names"), MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_answer_is_explained_in_planexecs_words(graph, use_models, ctx, answer, names):
    use_models(planner=scripted(plan_reply(PLAN)))
    config = thread()
    graph.invoke({"task": "say one"}, config, context=ctx())
    out = graph.invoke(Command(resume=answer), config, context=ctx())
    asked = out["__interrupt__"][0].value
    error = asked["error"]
    assert error.startswith("answer not understood"), error
    for name in names:  # what was wrong
        assert name in error, (name, error)
    for shape in ACCEPTED:  # what is accepted, with the fields of each
        assert shape in error, (shape, error)
    assert not [word for word in PYDANTIC if word in error], error
    assert asked["version"] == 1  # still waiting, for the same plan
    assert graph.get_state(config).next == ("approval",)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
