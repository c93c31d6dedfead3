"""Own tools, as a LangGraph user passes them: fail safe, clashes refused, MCP tasks not offered."""

from __future__ import annotations

import asyncio
import itertools
import os
import warnings

import pytest
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.errors import ConfigurationError, ToolNameClashError
from planexec.tools import ToolRegistry, default_registry
from planexec.tools.mcp import McpServers, load_mcp_config
from tests.helpers import always_fails, plan_of, plan_reply, scripted, step, thread
from tests.mcp_servers.running import http_server, stdio_entry

DELETED: list[str] = []


@tool
def delete_customer(customer: str) -> str:
    """Delete a customer's record."""
    DELETED.append(customer)
    return f"DELETED: {DELETED}"


@tool
def lookup_customer(customer: str) -> str:
    """Look a customer up."""
    return f"found {customer}"


def harmless(item):
    """Return a copy of a tool declared harmless in its own metadata (as after ``@tool``)."""
    copy = item.model_copy()
    copy.metadata = {"side_effects": False}
    return copy


def failing_then(revision_step):
    """Plan 1 fails; the replanner's revision runs ``revision_step``."""
    return scripted(
        plan_reply(plan_of(step(1, "always_fails", {"reason": "disk full"}))),
        plan_reply(plan_of(revision_step)),
    )


def approve_plan_one(graph, ctx, config):
    out = graph.invoke({"task": "clean up customer c-42"}, config, context=ctx)
    assert out["__interrupt__"][0].value["version"] == 1
    return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)


# -- fail safe -------------------------------------------------------------------------------


def test_an_undeclared_tool_a_revision_adds_goes_back_to_a_human(use_models, ctx):
    DELETED.clear()
    registry = ToolRegistry()
    registry.register(always_fails, side_effects=False)
    registry.register(delete_customer)  # side effects not declared
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    use_models(planner=failing_then(step(2, "delete_customer", {"customer": "c-42"})))
    config = thread()
    out = approve_plan_one(graph, ctx(approval="first"), config)
    assert DELETED == [], "the revision ran an undeclared tool without asking"
    asked = out["__interrupt__"][0].value
    assert asked["version"] == 2 and asked["origin"] == "replanner"
    assert asked["side_effect_tools"] == ["delete_customer"]
    assert asked["side_effect_notes"] == {"delete_customer": "side effects not declared"}
    assert "side effects not declared" in asked["description"]
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded" and DELETED == ["c-42"]


@pytest.mark.parametrize(
    "declare",
    [
        pytest.param(lambda r: r.register(lookup_customer, side_effects=False), id="register"),
        pytest.param(lambda r: r.register(harmless(lookup_customer)), id="tool-metadata"),
        pytest.param(
            lambda r: r.register(
                StructuredTool.from_function(
                    lambda customer: f"found {customer}",
                    name="lookup_customer",
                    description="Look a customer up.",
                    metadata={"side_effects": False},
                )
            ),
            id="from_function-metadata",
        ),
    ],
)
def test_a_tool_declared_harmless_is_added_by_a_revision_without_asking(use_models, ctx, declare):
    registry = ToolRegistry()
    registry.register(always_fails, side_effects=False)
    declare(registry)
    assert not registry.has_side_effects("lookup_customer")
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    use_models(planner=failing_then(step(2, "lookup_customer", {"customer": "c-42"})))
    out = approve_plan_one(graph, ctx(approval="first"), thread())
    assert "__interrupt__" not in out
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == "found c-42"


def test_undeclared_tools_are_side_effecting_and_say_why():
    registry = ToolRegistry([delete_customer])
    assert registry.has_side_effects("delete_customer")
    assert registry.side_effect_note("delete_customer") == "side effects not declared"
    registry.register(lookup_customer, side_effects=False)
    assert registry.side_effect_note("lookup_customer") is None
    registry.register(delete_customer, side_effects=True, replace=True)
    assert registry.has_side_effects("delete_customer")
    assert registry.side_effect_note("delete_customer") is None  # declared: nothing to explain


@pytest.mark.parametrize("value", ["no", 0, 1, "False", [False]])
def test_a_side_effects_mark_that_is_not_a_bool_is_refused(value):
    with pytest.raises(ConfigurationError, match=r"side_effects must be True or False, not"):
        ToolRegistry().register(lookup_customer, side_effects=value)
    marked = lookup_customer.model_copy()
    marked.metadata = {"side_effects": value}
    with pytest.raises(ConfigurationError, match=r"lookup_customer: side_effects must be True"):
        ToolRegistry([marked])


def test_every_built_in_tool_declares_its_side_effects():
    for item in default_registry():
        assert isinstance((item.metadata or {}).get("side_effects"), bool), item.name


# -- tools the way LangGraph users pass them ----------------------------------------------


def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


def test_build_graph_takes_a_list_of_tools_and_plain_functions(use_models, ctx):
    graph = build_graph(checkpointer=InMemorySaver(), tools=[harmless(lookup_customer), shout])
    planner = use_models(
        planner=scripted(
            plan_reply(
                plan_of(
                    step(1, "lookup_customer", {"customer": "c-7"}),
                    step(2, "shout", {"text": "$1"}, [1]),
                )
            )
        )
    )["planner"]
    config = thread()
    out = graph.invoke({"task": "shout a customer"}, config, context=ctx())
    asked = out["__interrupt__"][0].value
    assert asked["side_effect_tools"] == ["shout"]  # a plain function declares nothing
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == "FOUND C-7"
    assert "read_file" not in planner.prompts[0]  # a list means exactly those tools


def test_a_list_keeps_the_built_ins_when_they_are_spread_into_it(use_models, ctx):
    graph = build_graph(checkpointer=InMemorySaver(), tools=[*default_registry(), shout])
    planner = use_models(planner=scripted(plan_reply(plan_of(step(1, "shout", {"text": "a"})))))[
        "planner"
    ]
    out = graph.invoke({"task": "shout"}, thread(), context=ctx())
    assert "__interrupt__" in out
    assert '"read_file"' in planner.prompts[0] and '"shout"' in planner.prompts[0]


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({"shout": shout}, id="dict"),
        pytest.param("shout", id="str"),
        pytest.param(lookup_customer, id="a single tool"),
        pytest.param([shout, 42], id="a non-callable in the list"),
        pytest.param([shout, {"type": "web_search"}], id="a provider tool dict"),
    ],
)
def test_anything_else_is_a_type_error_at_build_time_saying_what_is_accepted(given):
    with pytest.raises(
        TypeError, match=r"a ToolRegistry or an iterable of LangChain tools and plain functions"
    ):
        build_graph(checkpointer=InMemorySaver(), tools=given)


def test_tool_registry_of_returns_a_registry_as_is_and_makes_one_of_a_list():
    registry = default_registry()
    assert ToolRegistry.of(registry) is registry
    made = ToolRegistry.of(iter([shout, lookup_customer]))
    assert made.names() == ["lookup_customer", "shout"]


# -- what is not a tool, said by name -------------------------------------------------------


def undocumented(customer: str) -> str:
    return customer


async def streams(customer: str):
    """Yield a customer's records."""
    yield customer


class IterationFails:
    def __iter__(self):
        raise RuntimeError("the user's own iteration failed")


class ReprFails:
    def __repr__(self):
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    "endless", [pytest.param(itertools.count, id="count"), pytest.param(lambda: iter(int, 1))]
)
def test_an_endless_iterable_of_tools_is_refused_not_read_forever(endless):
    with pytest.raises((TypeError, ValueError), match=r"more than 10000 items"):
        build_graph(checkpointer=InMemorySaver(), tools=endless())
    with pytest.raises((TypeError, ValueError), match=r"more than 10000 items"):
        ToolRegistry(endless())


def test_a_mapping_given_as_tools_is_named_by_type_and_size_never_by_contents(monkeypatch):
    monkeypatch.setenv("PLANEXEC_TEST_CANARY", "canary-value-in-the-environment")
    with pytest.raises(TypeError, match=r"not a mapping of type _Environ \(\d+ entries\)") as err:
        build_graph(checkpointer=InMemorySaver(), tools=os.environ)
    assert "canary" not in str(err.value) and "PATH" not in str(err.value)
    with pytest.raises(TypeError) as err:
        ToolRegistry.of([shout, {"api_key": "canary-value-in-a-dict"}])
    assert "canary" not in str(err.value) and "a mapping of type dict (1 entries)" in str(err.value)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        pytest.param("x" * 300, "a str of 300 characters", id="long text"),
        pytest.param(ReprFails(), "an object of type ReprFails", id="failing repr"),
        pytest.param([shout, ReprFails()], "one item is an object of type ReprFails", id="item"),
        pytest.param(987654321123, "not a value of type int", id="short scalar"),
        pytest.param("hunter2-db-pw", "not a str of 13 characters", id="short text"),
        pytest.param([shout, "hunter2-db-pw"], "one item is a str of 13 characters", id="text"),
        pytest.param([shout, 987654321123], "one item is a value of type int", id="number"),
        pytest.param([shout, 3.25], "one item is a value of type float", id="float"),
        pytest.param([shout, b"hunter2-db-pw"], "one item is 13 bytes (of type bytes)", id="bytes"),
        pytest.param([shout, None], "one item is None", id="None"),
        pytest.param([shout, ToolRegistry], "one item is the class planexec.tools.registry.Tool"),
    ],
)
def test_what_is_not_tools_is_described_without_its_contents(given, shown):
    with pytest.raises(TypeError) as err:
        ToolRegistry.of(given)
    said = str(err.value)
    assert shown in said
    assert "xxxxxxxxxx" not in said
    for held in ("hunter2", "987654321123", "3.25"):  # a value is never shown, only its type
        assert held not in said


def test_the_users_own_iteration_error_propagates_unchanged():
    with pytest.raises(RuntimeError, match="the user's own iteration failed"):
        build_graph(checkpointer=InMemorySaver(), tools=IterationFails())


def test_a_function_without_a_docstring_is_named_with_how_to_fix_it():
    with pytest.raises(ValueError) as err:
        build_graph(checkpointer=InMemorySaver(), tools=[shout, undocumented])
    said = str(err.value)
    assert "tests.integration.test_own_tools.undocumented" in said
    assert "docstring" in said and "StructuredTool.from_function(" in said
    assert "description=" in said


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (print, r"not a tool: print is a builtin function"),
        (len, r"not a tool: len is a builtin function"),
        ("".join, r"not a tool: str.join is a builtin function"),
        (streams, r"tests.integration.test_own_tools.streams: async generators are not supported"),
    ],
)
def test_builtins_and_async_generators_are_refused_by_name(given, message):
    with pytest.raises(TypeError, match=message):
        build_graph(checkpointer=InMemorySaver(), tools=[shout, given])
    with pytest.raises(TypeError, match=message):
        ToolRegistry().register(given)


# -- name clashes ------------------------------------------------------------------------


@tool
def read_file(path: str) -> str:
    """My own file reader."""
    return path


def test_a_taken_name_is_an_error_naming_both_unless_replaced():
    registry = default_registry()
    with pytest.raises(ToolNameClashError) as raised:
        registry.register(read_file)
    message = str(raised.value)
    assert "tool name 'read_file' is taken" in message
    assert "test_own_tools" in message and "planexec.tools.files" in message
    assert "replace=True" in message
    assert isinstance(raised.value, ConfigurationError)
    assert registry.get("read_file").description != "My own file reader."  # nothing replaced
    registry.register(read_file, replace=True)
    assert registry.get("read_file").description == "My own file reader."


def test_duplicates_in_the_iterable_are_refused_too():
    other = StructuredTool.from_function(shout, name="lookup_customer", description="Shout.")
    with pytest.raises(ToolNameClashError, match="tool name 'lookup_customer' is taken"):
        ToolRegistry([lookup_customer, other])
    with pytest.raises(ToolNameClashError, match="tool name 'lookup_customer' is taken"):
        build_graph(tools=[lookup_customer, other])


@pytest.fixture(scope="module")
def two_web_servers():
    """Two MCP servers with the same tools, over streamable HTTP (stdio through the adapters
    writes the server's errors to the sys.stderr of the time mcp was imported, which a pytest
    worker's capture does not back with a file)."""
    with http_server("web") as alpha, http_server("web") as beta:
        yield {
            "alpha": {"url": alpha, "transport": "streamable_http"},
            "beta": {"url": beta, "transport": "streamable_http"},
        }


def test_two_adapter_servers_with_one_tool_name_are_an_error_naming_both_servers(two_web_servers):
    from langchain_mcp_adapters.client import MultiServerMCPClient

    tools = asyncio.run(MultiServerMCPClient(two_web_servers).get_tools())
    assert [t.name for t in tools].count("search") == 2
    with pytest.raises(ToolNameClashError) as raised:
        ToolRegistry(tools)
    message = str(raised.value)
    assert "is taken" in message
    assert "MCP server 'alpha'" in message and "MCP server 'beta'" in message
    assert "tool_name_prefix=True" in message

    prefixed = MultiServerMCPClient(two_web_servers, tool_name_prefix=True)
    registry = ToolRegistry(asyncio.run(prefixed.get_tools()))
    assert len(registry) == len(tools)  # every tool kept
    assert registry.get("alpha_search").metadata["mcp"]["server"] == "alpha"
    assert not registry.has_side_effects("beta_search")


def test_an_mcp_tool_named_like_a_registered_tool_is_an_error_naming_both():
    servers = McpServers(load_mcp_config({"mcpServers": {"notes": stdio_entry("notes")}}))
    try:
        base = ToolRegistry()
        base.register(StructuredTool.from_function(shout, name="notes__search"))
        with pytest.raises(ToolNameClashError, match="tool name 'notes__search' is taken") as e:
            servers.registry(base)
        assert "MCP server 'notes'" in str(e.value) and "shout" in str(e.value)
    finally:
        servers.close()


# -- MCP tools that require task augmentation -------------------------------------------------


def test_a_tool_that_requires_task_augmentation_is_not_offered_and_a_warning_names_it():
    entry = stdio_entry("raw", RAW_TASK_TOOL="1")
    servers = McpServers(load_mcp_config({"mcpServers": {"raw": entry}}))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            registry = servers.registry(ToolRegistry())
        assert "raw__long_job" not in registry
        assert "raw__ok" in registry and "raw__maybe_task" in registry  # optional: offered
        [said] = [str(w.message) for w in caught if "long_job" in str(w.message)]
        assert "MCP server 'raw'" in said and "requires task augmentation" in said
    finally:
        servers.close()


def note_price(item: str) -> str:
    """Look up an item's price (read-only)."""
    return f"{item}: 1.00"


def save_note_file(path: str, text: str) -> dict[str, str]:
    """Write a note to a file."""
    return {"path": path}


def test_a_plain_functions_own_metadata_declares_it_as_the_tools_guide_says():
    from planexec.tools import ToolRegistry

    note_price.metadata = {"side_effects": False}  # type: ignore[attr-defined]
    save_note_file.metadata = {"side_effects": True, "file_fields": ["path"]}  # type: ignore[attr-defined]
    registry = ToolRegistry([note_price, save_note_file])
    assert registry.has_side_effects("note_price") is False
    assert registry.has_side_effects("save_note_file") is True
    assert tuple(registry.file_fields("save_note_file")) == ("path",)
