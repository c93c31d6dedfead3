"""The auth recipe's users: where they come from, and that a token never shows in a message."""

from __future__ import annotations

import asyncio
import json

import pytest

from planexec.auth import UsersConfigError, load_users
from planexec.auth.users import user_of_token

SECRET = "tok-very-secret-123"


def test_users_come_from_the_variable_before_the_file(tmp_path):
    file = tmp_path / "users.json"
    file.write_text(json.dumps({"from-file": {"identity": "bob", "permissions": ["approve"]}}))
    from_file = load_users({"PLANEXEC_AUTH_FILE": str(file)})
    assert from_file == {"from-file": {"identity": "bob", "permissions": ["approve"]}}
    both = {"PLANEXEC_AUTH_FILE": str(file), "PLANEXEC_AUTH_USERS": '{"t": {"identity": "al"}}'}
    assert load_users(both) == {"t": {"identity": "al", "permissions": []}}


def test_a_token_finds_its_user_and_nothing_else():
    users = load_users({"PLANEXEC_AUTH_USERS": json.dumps({SECRET: {"identity": "alice"}})})
    assert user_of_token(SECRET, users) == {"identity": "alice", "permissions": []}
    assert user_of_token(SECRET[:-1], users) is None
    assert user_of_token("", users) is None


@pytest.mark.parametrize(
    ("users", "message"),
    [
        (None, "planexec.auth has no users"),
        ("{not json", "is not JSON"),
        (json.dumps([SECRET]), "must be a JSON object"),
        (json.dumps({SECRET: "alice"}), "user 1: expected {identity, permissions}"),
        (json.dumps({SECRET: {"identity": " "}}), "user 1: identity must be a non-empty"),
        (json.dumps({SECRET: {"identity": "a", "permissions": "approve"}}), "list of strings"),
        (json.dumps({" ": {"identity": "a"}}), "user 1: the token is empty"),
    ],
)
def test_bad_users_are_refused_without_showing_a_token(users, message):
    environ = {} if users is None else {"PLANEXEC_AUTH_USERS": users}
    with pytest.raises(UsersConfigError) as caught:
        load_users(environ)
    assert message in str(caught.value)
    assert SECRET not in str(caught.value)


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(UsersConfigError, match="cannot read .*missing.json"):
        load_users({"PLANEXEC_AUTH_FILE": str(tmp_path / "missing.json")})


@pytest.mark.parametrize(
    "text",
    [
        f'{{"{SECRET}": {{"identity": "alice"}}, "{SECRET}": {{"identity": "mallory"}}}}',
        f'{{"{SECRET}": {{"identity": "alice", "identity": "mallory"}}}}',
    ],
)
def test_a_token_or_field_listed_twice_is_refused_without_showing_it(text):
    with pytest.raises(UsersConfigError) as caught:
        load_users({"PLANEXEC_AUTH_USERS": text})
    assert "listed twice" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_duplicate_token_leaves_the_server_auth_unconfigured(monkeypatch):
    from langgraph_sdk import Auth

    from planexec.auth import authenticate

    twice = f'{{"{SECRET}": {{"identity": "a"}}, "{SECRET}": {{"identity": "b"}}}}'
    monkeypatch.setenv("PLANEXEC_AUTH_USERS", twice)
    with pytest.raises(Auth.exceptions.HTTPException) as caught:
        asyncio.run(authenticate(f"Bearer {SECRET}"))
    assert caught.value.status_code == 500
    assert caught.value.detail == "server auth is not configured"
