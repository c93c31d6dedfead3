"""A wrong context is one InvalidContextError naming every wrong field, before anything runs:
from Python (a dict or ``Context(...)``) and over the API (issue 33)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client
from pydantic import BaseModel

from planexec import Context, build_graph
from planexec.context import MAX_CONTEXT_KEYS, InvalidContextError
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread
from tests.servers import langgraph_dev

PLAN = plan_of(step(1, "echo", {"text": "hi"}))
WORKSPACE_HINT = (
    "workspace: unknown field (a run's workspace is chosen by whoever runs planexec: "
    "build_graph(workspace=PATH), planexec run --workspace PATH; a run may name a shared "
    "folder below the workspace root with shared_folder)"
)


@pytest.fixture
def planner(use_models):
    """The planner's model: it would plan, if it were ever asked (it must not be)."""
    model = scripted(plan_reply(PLAN))
    use_models(planner=model)
    return model


@pytest.fixture
def graph(planner):
    return build_graph(InMemorySaver(), tools=ToolRegistry([echo]))


def refused(graph, context, planner, config=None) -> str:
    """Start a run with ``context``; return the refusal's message (nothing may be stored)."""
    config = config or thread()
    with pytest.raises(InvalidContextError) as caught:
        graph.invoke({"task": "say hi"}, config, context=context)
    assert not graph.get_state(config).values  # refused before anything was stored
    assert list(graph.checkpointer.list(config)) == []
    assert planner.prompts == []
    message = str(caught.value)
    assert message.startswith("invalid context: ") and "\n" not in message
    return message


def test_a_misspelt_key_in_a_dict_is_named_with_the_close_match(graph, planner):
    message = refused(graph, {"aproval": "always"}, planner)
    assert "aproval: unknown field (did you mean approval?)" in message


def test_every_wrong_key_and_value_of_a_dict_is_named_at_once(graph, planner):
    wrong = {"aproval": "always", "max_stepz": 3, "max_replans": "two"}
    message = refused(graph, wrong, planner)
    assert "aproval: unknown field (did you mean approval?)" in message
    assert "max_stepz: unknown field (did you mean max_steps?)" in message
    assert "max_replans: Input should be a valid integer" in message


def test_a_key_nothing_like_a_field_is_still_named(graph, planner):
    assert "colour: unknown field" in refused(graph, {"colour": "blue"}, planner)


def test_misspelt_keyword_arguments_of_context_are_one_error_naming_all():
    with pytest.raises(InvalidContextError) as caught:
        Context(aproval="always", max_stepz=3, llm_judge="yes")  # type: ignore[call-arg]
    message = str(caught.value)
    assert not isinstance(caught.value, TypeError)
    assert "aproval: unknown field (did you mean approval?)" in message
    assert "max_stepz: unknown field (did you mean max_steps?)" in message
    assert "llm_judge: Input should be a valid boolean" in message


def test_the_old_workspace_field_says_who_chooses_a_runs_workspace(graph, planner):
    with pytest.raises(InvalidContextError) as caught:
        Context(workspace="my-data")  # type: ignore[call-arg]
    assert WORKSPACE_HINT in str(caught.value)
    assert WORKSPACE_HINT in refused(graph, {"workspace": "my-data"}, planner)


@pytest.mark.parametrize("name", ["../x", "/etc", "a//b", ".hidden", ""])
def test_a_bad_shared_folder_name_is_refused_before_any_node_runs(graph, planner, name):
    message = refused(graph, {"shared_folder": name}, planner)
    assert message.startswith("invalid context: shared_folder: ")


def test_a_shared_folder_on_a_one_folder_graph_is_refused_before_any_node_runs(planner, tmp_path):
    graph = build_graph(InMemorySaver(), tools=ToolRegistry([echo]), workspace=tmp_path / "mine")
    message = refused(graph, Context(shared_folder="sales"), planner)
    assert "shared_folder" in message and "one folder" in message


@pytest.mark.parametrize("thread_id", ["a/b", "..", ".hidden"])
def test_a_thread_id_that_cannot_name_a_folder_is_refused_before_any_node_runs(
    graph, planner, thread_id
):
    config = {"configurable": {"thread_id": thread_id}}
    with pytest.raises(ValueError, match="thread id"):
        graph.invoke({"task": "say hi"}, config, context=Context())
    assert not graph.get_state(config).values
    assert planner.prompts == []


# ---- over the API: `langgraph dev` and the SDK --------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("context-server")
    env = {"PLANEXEC_WORKSPACE_ROOT": str(folder / "root"), "PLANEXEC_PLAN_MEMORY": "off"}
    with langgraph_dev(folder / "langgraph-dev.log", env) as url:
        yield url


def run_over_the_api(server: str, context: dict) -> tuple[dict, dict]:
    """Start a run with ``context`` through the SDK; return its result and the thread's state."""

    async def scenario():
        client = get_client(url=server)
        tid = (await client.threads.create())["thread_id"]
        result = await client.runs.wait(
            tid, "planexec", input={"task": "say hi"}, context=context, raise_error=False
        )
        return result, await client.threads.get_state(tid)

    return asyncio.run(scenario())


@pytest.mark.server
def test_a_misspelt_key_over_the_api_fails_the_run_naming_it(server, tmp_path):
    script = tmp_path / "planner.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": PLAN}]}]))
    context = {"planner_model": f"scripted:{script}", "aproval": "always", "max_stepz": 3}
    result, state = run_over_the_api(server, context)
    assert result["__error__"]["error"] == "InvalidContextError"
    message = result["__error__"]["message"]
    assert "aproval: unknown field (did you mean approval?)" in message
    assert "max_stepz: unknown field (did you mean max_steps?)" in message
    assert not state["values"]  # refused before anything was stored


@pytest.mark.server
def test_the_old_workspace_field_over_the_api_says_what_to_use(server):
    result, state = run_over_the_api(server, {"workspace": f"ws-{uuid.uuid4().hex[:6]}"})
    assert result["__error__"]["error"] == "InvalidContextError"
    assert WORKSPACE_HINT in result["__error__"]["message"]
    assert not state["values"]


@pytest.mark.server
def test_a_bad_shared_folder_over_the_api_is_refused_before_anything_is_stored(server):
    result, state = run_over_the_api(server, {"shared_folder": "../etc"})
    assert result["__error__"]["error"] == "InvalidContextError"
    assert "shared_folder" in result["__error__"]["message"]
    assert not state["values"]


def test_a_dict_key_that_is_not_text_is_named(graph, planner):
    message = refused(graph, {1: "x", "aproval": "always"}, planner)
    assert "1: a field name must be text" in message
    assert "aproval: unknown field (did you mean approval?)" in message


# ---- contexts planexec cannot read, and contexts too big to read (hostile review) ---------


@dataclass
class UsersOwnContext:
    """A user's own context class, with a setting named like planexec's but no ``planexec``."""

    approval: str = "always"


class UsersOwnModel(BaseModel):
    """The same as a pydantic model."""

    approval: str = "always"


@pytest.mark.parametrize(
    "context",
    [SimpleNamespace(approval="always"), UsersOwnContext(), UsersOwnModel(), SimpleNamespace()],
    ids=["namespace", "dataclass", "pydantic model", "empty namespace"],
)
def test_a_top_level_context_planexec_cannot_read_is_refused_saying_what_is_accepted(
    graph, planner, context
):
    message = refused(graph, context, planner)
    assert "expected a planexec Context or a dict of its fields" in message
    assert "in a parent graph, a parent context with planexec's settings in a 'planexec'" in message
    assert f"not a {type(context).__name__}" in message


def deeply_nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_deeply_nested_value_is_refused_not_a_recursion_error(graph, planner):
    with pytest.raises(InvalidContextError) as caught:
        Context(max_steps=deeply_nested(5000))  # type: ignore[arg-type]
    assert str(caught.value).startswith("invalid context: max_steps: Input should be a valid")
    assert len(str(caught.value)) < 300
    message = refused(graph, {"max_steps": deeply_nested(5000)}, planner)
    assert "max_steps: Input should be a valid integer (got [[[" in message


def test_a_context_with_more_keys_than_any_real_one_is_refused_at_once(graph, planner):
    huge = {f"approvalx{i}": 1 for i in range(100_000)}
    started = time.perf_counter()
    message = refused(graph, huge, planner)
    assert time.perf_counter() - started < 1.0
    assert "100,000 keys" in message and f"at most {MAX_CONTEXT_KEYS}" in message
    assert len(message) < 500


def test_many_wrong_fields_are_named_up_to_ten_then_counted(graph, planner):
    wrong = {f"max_stepz{i}": 1 for i in range(15)}
    message = refused(graph, wrong, planner)
    assert message.count("unknown field") == 10
    assert message.endswith("; and 5 more")
    assert "max_stepz0: unknown field" in message and "max_stepz10" not in message


@pytest.mark.parametrize(
    "context",
    [{"a" * 1_000_000: 1}, {"approval" + "l" * 200_000: 1}, {"max_steps": "x" * 1_000_000}],
    ids=["1 MB key", "a long near miss", "1 MB value"],
)
def test_a_huge_key_or_value_is_shown_cut_short(graph, planner, context):
    message = refused(graph, context, planner)
    assert len(message) < 300
    assert "..." in message


@pytest.mark.server
@pytest.mark.parametrize("key", ["x-colour", "__colour__", "langgraph_colour"])
def test_a_key_the_server_never_adds_is_named_over_the_api(server, key):
    """The server adds its own keys (headers, auth, tracing) to ``configurable``, not context."""
    result, state = run_over_the_api(server, {key: "blue"})
    assert result["__error__"]["error"] == "InvalidContextError"
    assert f"{key}: unknown field" in result["__error__"]["message"]
    assert not state["values"]


@pytest.mark.server
def test_a_huge_context_over_the_api_is_refused_at_once_with_a_short_error(server):
    result, state = run_over_the_api(server, {f"approvalx{i}": 1 for i in range(5_000)})
    assert result["__error__"]["error"] == "InvalidContextError"
    message = result["__error__"]["message"]
    assert "5,000 keys" in message and len(message) < 500
    assert not state["values"]


@pytest.mark.server
def test_a_run_sent_with_custom_headers_is_not_refused_for_them(server, tmp_path):
    """The server copies ``x-*`` headers into ``configurable``; the context stays as sent."""
    script = tmp_path / "planner.json"
    plan = plan_of(step(1, "list_files", {}))
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}]))

    async def scenario():
        client = get_client(url=server, headers={"x-tenant": "acme", "x-request-id": "r-1"})
        tid = (await client.threads.create())["thread_id"]
        context = {"planner_model": f"scripted:{script}"}
        return await client.runs.wait(
            tid, "planexec", input={"task": "say hi"}, context=context, raise_error=False
        )

    result = asyncio.run(scenario())
    assert "__error__" not in result, result
    assert result["__interrupt__"][0]["value"]["type"] == "plan_approval"


def test_a_misspelt_key_inside_a_setting_names_its_path_and_the_inner_key_meant(graph, planner):
    message = refused(graph, {"planner_timeouts": {"conect": 5, "idle": 10}}, planner)
    assert "planner_timeouts.conect: unknown field (did you mean connect?)" in message
    prices = {"model_prices": {"openai:x": {"inptu": 1.0, "output": 2.0}}}
    message = refused(graph, prices, planner)
    assert "model_prices.openai:x.inptu: unknown field (did you mean input?)" in message


def test_a_key_differing_from_a_field_in_case_or_separators_is_named_with_it(graph, planner):
    message = refused(graph, {"MAX_STEPS": 3, "maxReplans": 1}, planner)
    assert "MAX_STEPS: unknown field (did you mean max_steps?)" in message
    assert "maxReplans: unknown field (did you mean max_replans?)" in message
