"""MCP servers as tool sources, for real: a stdio server and a streamable HTTP one, offline."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from typer.testing import CliRunner

from planexec import build_graph
from planexec.concurrency.toolcalls import StepTimeout
from planexec.errors import ConfigurationError, ToolError, TransientToolError
from planexec.execution.retries import retryable
from planexec.tools import ToolRegistry
from planexec.tools.mcp import McpServers, load_mcp_config
from tests.helpers import plan_of, plan_reply, scripted, step, thread, wait_until
from tests.mcp_servers.running import children, http_server, stdio_entry
from tests.servers import free_port

TOKEN = "notes-token-7f3a9c2e51"


@pytest.fixture(scope="module")
def web_url():
    with http_server("web") as url:
        yield url


@pytest.fixture(scope="module")
def config(web_url):
    return {
        "mcpServers": {
            "notes": stdio_entry("notes", NOTES_TOKEN=TOKEN),
            "web": {"url": web_url, "planexec": {"tools": {"publish": {"destructive": True}}}},
        }
    }


@pytest.fixture(scope="module")
def servers(config):
    opened = McpServers(load_mcp_config(config))
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def registry(servers):
    return servers.registry(ToolRegistry())


def test_tools_of_two_servers_keep_apart_with_their_hints(registry):
    assert {"notes__search", "web__search", "notes__delete_note", "web__publish"} <= set(
        registry.names()
    )
    assert not registry.has_side_effects("notes__read_note")
    assert not registry.has_side_effects("web__search")  # read-only, open world
    assert registry.has_side_effects("notes__delete_note")
    assert registry.side_effect_note("notes__delete_note") == "destructive per the server's hint"
    assert registry.has_side_effects("web__publish")  # no annotations: may write
    assert registry.side_effect_note("web__publish") == "destructive per the operator"
    assert (
        registry.side_effect_note("web__set_flag")
        == "writes, not destructive, per the server's hint"
    )
    # timeouts: retried only for a tool declared idempotent
    timed_out = StepTimeout(1)
    for name, retried in [
        ("web__set_flag", True),
        ("notes__delete_note", False),
        ("web__publish", False),
    ]:
        assert retryable(timed_out, {"tool": name}, registry) is retried, name
    # the planner sees the input schema, and the output schema is in the metadata
    described = {t["name"]: t for t in json.loads(registry.describe())}
    assert described["notes__read_note"]["args_schema"]["required"] == ["title"]
    assert "MCP server 'notes'" in described["notes__search"]["description"]
    out = registry.get("notes__read_note").metadata["output_schema"]
    assert out["required"] == ["title", "text", "words"]


def test_sessions_are_reused_and_sync_and_async_calls_share_them(servers, registry):
    read = registry.get("notes__read_note")
    read.invoke({"title": "groceries"})
    pid = registry.get("notes__pid").invoke({})["result"]
    opened = servers.server("notes").opened
    started = time.perf_counter()
    for _ in range(20):
        assert read.invoke({"title": "groceries"})["text"] == "eggs, milk"
    per_call = (time.perf_counter() - started) / 20

    async def both():
        return await asyncio.gather(
            registry.get("notes__pid").ainvoke({}),
            registry.get("web__search").ainvoke({"query": "eggs"}),
        )

    same_pid, found = asyncio.run(both())
    assert same_pid["result"] == pid and found["result"] == "https://example.test/eggs"
    assert servers.server("notes").opened == opened  # no new session, no new process
    assert len(children(holding="tests.mcp_servers.notes")) == 1
    assert per_call < 0.2, per_call


def test_errors_name_the_server_and_its_message(registry):
    with pytest.raises(ToolError, match=r"MCP server 'notes', tool fail: .*refused: no reason"):
        registry.get("notes__fail").invoke({"reason": "no reason"})
    with pytest.raises(ToolError, match=r"MCP server 'notes'.*no note titled 'nope'"):
        registry.get("notes__read_note").invoke({"title": "nope"})


def test_bad_configs_are_refused_naming_the_field(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    cases = [
        ({"servers": {}}, "mcpServers"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a: .*give command"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "not both"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "server name 'a b'"),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "url must start with http"),
        ({"mcpServers": {"a": {"url": "http://h", "transport": "sse"}}}, "transport 'sse'"),
        (
            {
                "mcpServers": {
                    "a": {"command": "x", "planexec": {"tools": {"t": {"readonly": True}}}}
                }
            },
            "planexec.tools.t.readonly",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": "${NO_SUCH_VAR}"}}}},
            r"mcpServers.a.env.K uses \$\{NO_SUCH_VAR\}",
        ),
    ]
    for data, message in cases:
        with pytest.raises(ConfigurationError, match=message):
            load_mcp_config(data)
    path = tmp_path / "mcp.json"
    path.write_text("{nope")
    with pytest.raises(ConfigurationError, match=f"MCP config {re.escape(str(path))} is not JSON"):
        load_mcp_config(path)
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_mcp_config(tmp_path / "missing.json")


def test_an_override_of_a_tool_the_server_lacks_is_refused(config):
    data = json.loads(json.dumps(config))
    data["mcpServers"] = {"notes": data["mcpServers"]["notes"]}
    data["mcpServers"]["notes"]["planexec"] = {"tools": {"drop_table": {"read_only": True}}}
    before = set(children(holding="tests.mcp_servers.notes"))  # the module's server, if open
    with (
        McpServers(load_mcp_config(data)) as servers,
        pytest.raises(ConfigurationError, match="drop_table"),
    ):
        servers.tools()

    def left() -> set[int]:
        return set(children(holding="tests.mcp_servers.notes")) - before

    # the server started to list its tools ends with the servers, the refusal notwithstanding
    assert wait_until(lambda: not left(), 10), left()


def test_secrets_of_the_config_are_scrubbed_from_the_run(registry, use_models, ctx):
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    use_models(planner=scripted(plan_reply(plan_of(step(1, "notes__whoami")))))
    config = thread()
    graph.invoke({"task": "who am I"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded", out["final"]
    assert TOKEN not in json.dumps(out, default=str)
    assert out["steps"]["1"]["output"] == {"result": "token=[redacted]"}


MIXED = plan_of(
    step(1, "notes__search", {"query": "eggs"}),
    step(2, "web__search", {"query": "eggs"}),
    step(3, "notes__read_note", {"title": "groceries"}),
    step(4, "web__publish", {"text": "$3.text"}, [3]),
    step(5, "notes__fail", {"reason": "disk full"}),
    step(6, "notes__delete_note", {"title": "scratch"}, [5]),
)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_whole_run_mixing_two_servers_with_a_replan(registry, use_models, ctx, mode):
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    revision = plan_of(step(7, "notes__delete_note", {"title": "old"}))
    use_models(planner=scripted(plan_reply(MIXED), plan_reply(revision)))
    config, context = thread(), ctx(max_replans=1)

    async def go():
        first = await graph.ainvoke({"task": "groceries"}, config, context=context)
        approval = first["__interrupt__"][0].value
        # a revision adding a destructive tool asks again under the `first` policy
        second = await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)
        again = second["__interrupt__"][0].value
        done = await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)
        return approval, again, done

    if mode == "async":
        approval, again, out = asyncio.run(go())
    else:
        first = graph.invoke({"task": "groceries"}, config, context=context)
        approval = first["__interrupt__"][0].value
        second = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
        again = second["__interrupt__"][0].value
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert approval["side_effect_tools"] == ["notes__delete_note", "web__publish"]
    assert (
        approval["side_effect_notes"]["notes__delete_note"] == "destructive per the server's hint"
    )
    description = approval["action_requests"][0]["description"]
    assert "`notes__delete_note` (destructive per the server's hint)" in description, description
    assert "notes__delete_note" in again["side_effect_tools"] and again["version"] == 2
    steps = out["steps"]
    assert steps["1"]["output"] == {"result": ["groceries"]}
    assert steps["2"]["output"] == {"result": "https://example.test/eggs"}
    assert steps["3"]["output"]["text"] == "eggs, milk"
    assert steps["4"]["output"] == {"result": "published 10 characters"}
    assert "5" not in steps  # replaced by the revision, which says why
    assert "step 5: MCP server 'notes', tool fail: " in json.dumps(out["revisions"])
    assert "refused: disk full" in json.dumps(out["revisions"])
    assert steps["7"]["output"] == {"result": "deleted old"}
    assert out["final"]["status"] == "succeeded", out["final"]


def test_a_server_that_exits_mid_run_fails_only_its_step_and_the_thread_resumes(
    servers, registry, use_models, ctx
):
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    crashing = plan_of(step(1, "notes__crash"), step(2, "web__search", {"query": "milk"}))
    after = plan_of(step(3, "notes__read_note", {"title": "todo"}))
    use_models(planner=scripted(plan_reply(crashing), plan_reply(after)))
    config, context = thread(), ctx(max_replans=1)
    before = servers.server("notes").opened
    graph.invoke({"task": "crash"}, config, context=context)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    steps, why = out["steps"], json.dumps(out["revisions"])
    assert "step 1: MCP server 'notes' exited (its connection closed) while crash ran" in why
    assert "not retried: crash is not declared idempotent" in why
    assert steps["2"]["output"] == {"result": "https://example.test/milk"}
    assert steps["3"]["output"]["text"] == "write tests"  # a new session, a new process
    assert out["final"]["status"] == "succeeded", out["final"]
    assert servers.server("notes").opened == before + 1
    assert len(children(holding="tests.mcp_servers.notes")) == 1


def test_an_http_server_that_goes_away_fails_the_call_and_is_reconnected_when_back():
    port = free_port()
    with http_server("web", port) as url:
        servers = McpServers(load_mcp_config({"mcpServers": {"web": {"url": url}}}))
        search = servers.registry(ToolRegistry()).get("web__search")
        assert search.invoke({"query": "eggs"}) == {"result": "https://example.test/eggs"}
    # never reached the server: transient, so the executor tries again after its backoff
    with pytest.raises(TransientToolError, match="MCP server 'web' failed: ConnectError"):
        search.invoke({"query": "eggs"})
    with pytest.raises(TransientToolError, match="MCP server 'web' could not be started"):
        search.invoke({"query": "eggs"})
    with http_server("web", port):
        assert search.invoke({"query": "milk"}) == {"result": "https://example.test/milk"}
        assert servers.server("web").opened == 2
    servers.close()


def test_a_timed_out_call_is_not_retried_and_the_session_goes_on(
    servers, registry, use_models, ctx
):
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    plan = plan_of(step(1, "notes__slow_append", {"seconds": 30}), step(2, "notes__pid"))
    use_models(planner=scripted(plan_reply(plan)))
    config, context = thread(), ctx(step_timeout=0.5, max_replans=0, step_max_attempts=3)
    opened = servers.server("notes").opened
    graph.invoke({"task": "slow"}, config, context=context)
    started = time.monotonic()
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert time.monotonic() - started < 5
    assert out["steps"]["1"]["status"] == "failed" and out["steps"]["1"]["attempts"] == 1
    assert "timed out after 0.5 s" in out["steps"]["1"]["error"]
    assert isinstance(out["steps"]["2"]["output"]["result"], int)
    assert servers.server("notes").opened == opened  # the same session served the next call


def test_closing_ends_every_server_process(config):
    with McpServers(load_mcp_config(config)) as servers:
        servers.tools()
        assert len(children(holding="tests.mcp_servers.notes")) == 2  # the module's, and this
    assert len(children(holding="tests.mcp_servers.notes")) == 1


def test_tools_of_langchain_mcp_adapters_are_read_the_same_way(web_url):
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"web": {"url": web_url, "transport": "streamable_http"}})
    registry = ToolRegistry(asyncio.run(client.get_tools()))
    assert not registry.has_side_effects("search")
    assert registry.has_side_effects("publish")
    assert registry.side_effect_note("publish") == "no hints: may write or delete"
    assert asyncio.run(registry.get("search").ainvoke({"query": "milk"})) == {
        "result": "https://example.test/milk"
    }


def test_the_cli_runs_a_plan_over_two_servers_and_flags_the_destructive_tools(
    config, tmp_path, monkeypatch
):
    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    revision = plan_of(step(7, "notes__read_note", {"title": "todo"}))
    script = tmp_path / "planner.json"
    script.write_text(
        json.dumps(
            [
                {"match": "refused: disk full", "tool_calls": [{"name": "Plan", "args": revision}]},
                {"tool_calls": [{"name": "Plan", "args": MIXED}]},
            ]
        )
    )
    result = CliRunner().invoke(
        app,
        ["run", "groceries", "--mcp", str(path), "--planner-model", f"scripted:{script}",
         "--workspace", "ws", "--max-replans", "1", "--json"],
        input="approve\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        "tools that write or send: notes__delete_note (destructive per the server's hint), "
        "web__publish (destructive per the operator)"
    ) in result.stderr, result.stderr
    assert result.stderr.count("Run this plan?") == 1  # the revision adds a read-only tool only
    done = json.loads(result.stdout)
    assert done["final"]["status"] == "succeeded", done["final"]
    assert "refused: disk full" in result.stderr
    assert done["steps"]["7"]["output"]["text"] == "write tests"
    assert TOKEN not in result.output
    assert len(children(holding="tests.mcp_servers.notes")) == 1  # the CLI closed its own


def test_mcp_output_schemas_feed_the_listing_the_plan_check_and_the_output_check(
    registry, use_models, ctx
):
    """Issue 27 over MCP: a tool's outputSchema is its declared output, a lying server's
    output fails its own step (the client's own check is not relied on), and a reference to
    a field the schema lacks is refused before approval."""
    from planexec.plan import PlanValidationError, validate_plan

    listed = {e["name"]: e for e in json.loads(registry.describe())}
    assert listed["notes__read_note"]["returns"] == "{title: string, text: string, words: integer}"
    assert listed["web__search"]["returns"] == "{result: string}"
    wrong = plan_of(
        step(1, "notes__read_note", {"title": "todo"}),
        step(2, "web__search", {"query": "$1.wordz"}),
    )
    with pytest.raises(PlanValidationError, match=r"no field 'wordz' \(fields: title, text, words"):
        validate_plan(wrong, registry, max_steps=10)

    graph = build_graph(checkpointer=InMemorySaver(), tools=registry)
    lying = plan_of(
        step(1, "notes__lying_note", {"title": "todo"}),
        step(2, "web__search", {"query": "$1.text"}),
        step(3, "notes__read_note", {"title": "todo"}),
    )
    use_models(planner=scripted(plan_reply(lying)))
    config, context = thread(), ctx(max_replans=0)
    graph.invoke({"task": "lie"}, config, context=context)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    steps = out["steps"]
    assert steps["1"]["status"] == "failed"
    assert steps["1"]["error"] == (
        "notes__lying_note returned an output that does not match its declared output schema: "
        "at text: expected string; got 42"
    )
    assert steps["2"]["status"] == "skipped"
    assert steps["3"]["output"]["words"] == 2


def test_arguments_of_mcp_tools_are_checked_with_the_plan(registry):
    """The server's input schema (JSON Schema, not a pydantic model) is checked before approval."""
    from planexec.plan import PlanValidationError, validate_plan

    def problems(*steps):
        try:
            validate_plan(plan_of(*steps), registry, max_steps=10)
        except PlanValidationError as exc:
            return exc.errors
        return []

    assert problems(step(1, "notes__read_note", {"titel": "todo"})) == [
        "step 1: notes__read_note has no argument 'titel' (arguments: title)",
        'step 1: notes__read_note: at its arguments: the required field "title" is missing; '
        "got an object (0 fields)",
    ]
    assert problems(step(1, "notes__read_note", {"title": 3})) == [
        "step 1: notes__read_note: at title: expected string; got 3"
    ]
    # a referenced value is known only at run time, where its shape was checked already
    assert (
        problems(
            step(1, "web__search", {"query": "x"}),
            step(2, "notes__read_note", {"title": "$1.result"}),
        )
        == []
    )
