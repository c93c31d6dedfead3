"""MCP tools through ``langgraph dev``: the operator points the served graph at an MCP file."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langgraph_sdk import get_client

from tests.helpers import plan_of, step, wait_until
from tests.mcp_servers.running import children, http_server, stdio_entry
from tests.servers import langgraph_dev

pytestmark = pytest.mark.server

MIXED = plan_of(
    step(1, "notes__read_note", {"title": "groceries"}),
    step(2, "web__search", {"query": "milk"}),
    step(3, "notes__fail", {"reason": "disk full"}),
    step(4, "web__publish", {"text": "$1.text"}, [1]),
)
REVISION = plan_of(step(5, "notes__search", {"query": "tests"}))


@pytest.fixture(scope="module")
def tag():
    return f"lgdev-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tag):
    folder = tmp_path_factory.mktemp("mcp-server")
    with http_server("web") as web_url:
        config = folder / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "notes": stdio_entry("notes", tag=tag, NOTES_TOKEN="lgdev-secret-41c9e"),
                        "web": {"url": web_url},
                    }
                }
            )
        )
        env = {
            "PLANEXEC_WORKSPACE_ROOT": str(folder / "root"),
            "PLANEXEC_PLAN_MEMORY": "off",
            "PLANEXEC_MCP_CONFIG": str(config),
        }
        with langgraph_dev(folder / "langgraph-dev.log", env) as url:
            yield url, folder
    # the server's end ends its MCP processes: none is left behind
    assert wait_until(lambda: not children(0, holding=tag), 15), children(0, holding=tag)


def test_a_whole_run_over_the_api_with_two_mcp_servers(served, tag, tmp_path):
    url, _ = served
    script = tmp_path / "planner.json"
    script.write_text(
        json.dumps(
            [
                {"match": "refused: disk full", "tool_calls": [{"name": "Plan", "args": REVISION}]},
                {"tool_calls": [{"name": "Plan", "args": MIXED}]},
            ]
        )
    )
    context = {"planner_model": f"scripted:{script}", "max_replans": 1}

    async def one_run(client):
        thread = await client.threads.create()
        tid = thread["thread_id"]
        interrupts = []
        async for part in client.runs.stream(
            tid, "planexec", input={"task": "groceries"}, context=context, stream_mode=["updates"]
        ):
            if part.event == "updates" and "__interrupt__" in (part.data or {}):
                interrupts.extend(part.data["__interrupt__"])
        request = interrupts[0]["value"]
        await client.runs.wait(
            tid, "planexec", command={"resume": {"action": "approve"}}, context=context
        )
        return request, (await client.threads.get_state(tid))["values"]

    async def scenario():
        client = get_client(url=url)
        first = await one_run(client)
        second = await one_run(client)
        return first, second

    (request, values), (_, again) = asyncio.run(scenario())
    assert request["side_effect_tools"] == ["web__publish"]
    assert request["side_effect_notes"] == {"web__publish": "no hints: may write or delete"}
    assert (
        "`web__publish` (no hints: may write or delete)"
        in (request["action_requests"][0]["description"])
    )
    for final in (values, again):
        assert final["final"]["status"] == "succeeded", final["final"]
        steps = final["steps"]
        assert steps["1"]["output"]["text"] == "eggs, milk"
        assert steps["2"]["output"] == {"result": "https://example.test/milk"}
        assert steps["4"]["output"] == {"result": "published 10 characters"}
        assert steps["5"]["output"] == {"result": ["todo"]}
        assert "refused: disk full" in json.dumps(final["revisions"])
    # one notes process served both runs: sessions are the server process's, reused
    assert len(children(0, holding=tag)) == 1
