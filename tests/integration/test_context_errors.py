"""A wrong context is one InvalidContextError naming every wrong field, before anything runs:
from Python (a dict or ``Context(...)``) and over the API (issue 33)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client

from planexec import Context, build_graph
from planexec.context import InvalidContextError
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
