"""MCP servers that misbehave: each once hung a call, leaked a key, grew without bound, or
started servers nobody asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from planexec.errors import ConfigurationError, ToolError
from planexec.tools import ToolRegistry
from planexec.tools.mcp import McpServers, load_mcp_config
from planexec.tools.mcp.config import url_tokens
from planexec.tools.mcp.sessions import STDERR_KEPT, ErrorTail
from tests.mcp_servers.running import PYTHONPATH, ROOT, http_server, stdio_entry


@pytest.fixture(scope="module")
def raw():
    servers = McpServers(load_mcp_config({"mcpServers": {"raw": stdio_entry("raw")}}))
    yield servers, servers.registry(ToolRegistry())
    servers.close()


def test_a_stray_print_is_skipped_and_an_unreadable_reply_fails_its_call_at_once(raw):
    servers, tools = raw
    assert tools.get("raw__stray_then_ok").invoke({}) == "stray_then_ok done"
    started = time.monotonic()
    with pytest.raises(ToolError, match="sent a message that is not valid MCP"):
        tools.get("raw__surrogate").invoke({})
    assert time.monotonic() - started < 5  # not the step's time limit
    assert tools.get("raw__ok").invoke({}) == "ok done"  # a new session
    assert servers.server("raw").opened == 2


def test_a_chatty_servers_error_output_is_read_and_only_its_tail_kept(raw):
    _, tools = raw
    assert tools.get("raw__chatty").invoke({}) == "chatty done"
    tail = ErrorTail("t")
    tail.file.write("x" * 10 * STDERR_KEPT + "the end")
    tail.file.flush()
    deadline = time.monotonic() + 5
    while not tail.tail().endswith("the end") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tail.tail().endswith("the end") and len(tail.tail()) <= STDERR_KEPT


def test_a_server_that_never_initialises_fails_within_its_timeout_naming_the_phase():
    entry = {**stdio_entry("raw", RAW_SILENT="1"), "planexec": {"timeout": 1}}
    servers = McpServers(load_mcp_config({"mcpServers": {"silent": entry}}))
    started = time.monotonic()
    with pytest.raises(
        ConfigurationError, match=r"did not start \(connect and initialize\) within 1 s"
    ):
        servers.registry(ToolRegistry())
    assert time.monotonic() - started < 5
    servers.close()


def test_keys_in_a_server_url_are_secrets_and_never_quoted():
    assert url_tokens("https://h.example/mcp/sk-ak-QUERYSECRET999/?api_key=QUERYSECRET888") == [
        "QUERYSECRET888",
        "sk-ak-QUERYSECRET999",
    ]
    assert url_tokens("https://h.example/v1/mcp") == []
    words = "https://api.example.com/organizations/production-server-eu?region=europe&mode=on"
    assert url_tokens(words) == []  # words are not secrets: they would vanish from every output
    with http_server("web") as url:
        wrong = url.replace("/mcp", "/mcp/sk-ak-QUERYSECRET999/?api_key=QUERYSECRET888")
        servers = McpServers(load_mcp_config({"mcpServers": {"web": {"url": wrong}}}))
        with pytest.raises(ConfigurationError) as caught:
            servers.registry(ToolRegistry())
        servers.close()
    assert "QUERYSECRET" not in str(caught.value)


def test_the_environment_starts_no_server_on_import_and_a_bad_file_is_one_line(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "server.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(30)\n")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"s": {"command": sys.executable, "args": [str(script)]}}})
    )
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "PLANEXEC_MCP_CONFIG": str(config)}
    code = "import planexec, planexec.graph, planexec.runs; from planexec import build_graph"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, timeout=60)
    assert not marker.exists()

    (tmp_path / "broken.json").write_text("{not json")
    env["PLANEXEC_MCP_CONFIG"] = str(tmp_path / "broken.json")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"goal": "g", "steps": [{"list_files": "."}]}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "planexec",
            "run",
            "--plan",
            str(plan),
            "--db",
            str(tmp_path / "r.db"),
            "-y",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    assert "broken.json" in done.stderr + done.stdout
