"""What MCP hints and the operator's overrides make of a tool; names; the config's secrets."""

from __future__ import annotations

import re

import pytest

from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT
from planexec.redaction.secrets import scrub_text
from planexec.tools import registry
from planexec.tools.mcp import hints, load_mcp_config
from planexec.tools.mcp.config import ToolHints
from planexec.tools.mcp.hints import marks, tool_name


def meaning(annotations, overrides=None):
    found = marks("s", "t", annotations, overrides or {})
    return found[registry.SIDE_EFFECTS], found[RETRY_ON_TIMEOUT], found["mcp"]["why"]


def test_the_keys_are_the_registrys():
    assert hints.SIDE_EFFECTS == registry.SIDE_EFFECTS and hints.MCP_KEY == registry.MCP_KEY


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"readOnlyHint": True}, (False, False, None)),
        ({"readOnlyHint": True, "idempotentHint": True}, (False, True, None)),
        ({"destructiveHint": True}, (True, False, "destructive per the server's hint")),
        (None, (True, False, "no hints: may write or delete")),
        ({}, (True, False, "no hints: may write or delete")),
        ({"openWorldHint": True}, (True, False, "destructive per the server's hint")),
        (
            {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
            (True, True, "writes, not destructive, per the server's hint"),
        ),
        ({"readOnlyHint": "yes"}, (True, False, "no hints: may write or delete")),
    ],
)
def test_hints_map_to_side_effects_and_retries(annotations, expected):
    assert meaning(annotations) == expected


def test_the_operator_overrides_the_server():
    lying = {"readOnlyHint": True, "idempotentHint": True}
    said = {"t": ToolHints(read_only=False, idempotent=False)}
    assert meaning(lying, said) == (True, False, "destructive per the operator")
    everyone = {"*": ToolHints(read_only=False), "t": ToolHints(destructive=False)}
    assert meaning(lying, everyone) == (True, True, "writes, not destructive, per the operator")
    trusted = {"t": ToolHints(read_only=True)}
    assert meaning(None, trusted) == (False, False, None)
    found = marks("s", "t", lying, said)["mcp"]
    assert found["overridden"] == ["idempotent", "read_only"]
    assert found["hints"] == {"readOnlyHint": False, "idempotentHint": False}


def test_names_are_distinct_and_legal_for_every_provider():
    assert tool_name("notes", "search") == "notes__search"
    assert tool_name("web", "search") != tool_name("notes", "search")
    assert tool_name("", "search") == "search"
    assert tool_name("s", "a.b/c d").startswith("s__a_b_c_d_")
    assert tool_name("s", "a.b") != tool_name("s", "a_b") == "s__a_b"
    long_a, long_b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    for name in (long_a, long_b, tool_name("s", "ünïcode")):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name), name
    assert long_a != long_b


def test_secrets_of_env_and_headers_are_registered(monkeypatch):
    monkeypatch.setenv("MY_SEARCH_TOKEN", "tok-from-env-93ab")
    config = load_mcp_config(
        {
            "mcpServers": {
                "a": {"command": "x", "env": {"API_KEY": "env-key-5521", "LOG_LEVEL": "debug"}},
                "b": {
                    "url": "https://u:url-pass-77@h.example/mcp",
                    "headers": {
                        "Authorization": "Bearer hdr-token-1234",
                        "X-Search-Token": "${MY_SEARCH_TOKEN}",
                        "Accept": "application/json",
                    },
                },
            }
        }
    )
    assert config.mcpServers["b"].headers["X-Search-Token"] == "tok-from-env-93ab"
    text = scrub_text(
        "env-key-5521 hdr-token-1234 url-pass-77 tok-from-env-93ab debug application/json"
    )
    assert text == "[redacted] [redacted] [redacted] [redacted] debug application/json"
