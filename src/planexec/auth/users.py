"""The users the auth recipe knows: bearer tokens read from the environment or a JSON file.

``$PLANEXEC_AUTH_USERS`` holds the users as JSON text, ``$PLANEXEC_AUTH_FILE`` names a JSON
file of the same shape (the variable wins when both are set)::

    {"<token>": {"identity": "alice", "permissions": ["approve"]},
     "<another token>": {"identity": "bob"}}

They are read again on every request (a small file: adding or removing a user needs no
restart). A token listed twice (or a user's field listed twice) is a configuration error,
not "the last one wins". A token is compared with every known token in constant time
(:func:`hmac.compare_digest`); tokens never appear in a message or a log.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Mapping
from pathlib import Path

from typing_extensions import TypedDict

USERS_ENV = "PLANEXEC_AUTH_USERS"
"""The environment variable holding the users as JSON text."""
USERS_FILE_ENV = "PLANEXEC_AUTH_FILE"
"""The environment variable naming a JSON file of the users."""


class AuthUser(TypedDict):
    """One user: who the server says they are and what they may do."""

    identity: str
    permissions: list[str]


class UsersConfigError(ValueError):
    """The users' configuration is missing or malformed (the message never shows a token)."""


def load_users(environ: Mapping[str, str] | None = None) -> dict[str, AuthUser]:
    """Return the known users by token, from ``$PLANEXEC_AUTH_USERS`` or ``$PLANEXEC_AUTH_FILE``.

    Raises :class:`UsersConfigError` when neither is set or the JSON is malformed.
    """
    env = os.environ if environ is None else environ
    text = env.get(USERS_ENV, "").strip()
    origin = f"${USERS_ENV}"
    if not text:
        file = env.get(USERS_FILE_ENV, "").strip()
        if not file:
            raise UsersConfigError(
                f"planexec.auth has no users: set ${USERS_ENV} (JSON) or ${USERS_FILE_ENV}"
                " (a JSON file) to {token: {identity, permissions}}"
            )
        origin = file
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as error:
            raise UsersConfigError(f"cannot read {origin}: {error.strerror}") from None
    try:
        raw = json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except json.JSONDecodeError as error:
        raise UsersConfigError(f"{origin} is not JSON: {error.msg} (line {error.lineno})") from None
    except _DuplicateKeyError:
        raise UsersConfigError(
            f"{origin}: a token (or a field of one user) is listed twice;"
            " each token must name exactly one user"
        ) from None
    return _users_of(raw, origin)


def user_of_token(token: str, users: Mapping[str, AuthUser]) -> AuthUser | None:
    """Return the user ``token`` belongs to, comparing it with every token in constant time."""
    given = token.encode("utf-8")
    found: AuthUser | None = None
    for known, user in users.items():
        if hmac.compare_digest(given, known.encode("utf-8")) and found is None:
            found = user
    return found


class _DuplicateKeyError(ValueError):
    """A JSON object names one key twice (which key is not said: it may be a token)."""


def _refuse_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """Build a JSON object, refusing a key listed twice (json would keep the last silently)."""
    built = dict(pairs)
    if len(built) != len(pairs):
        raise _DuplicateKeyError
    return built


def _users_of(raw: object, origin: str) -> dict[str, AuthUser]:
    if not isinstance(raw, dict):
        raise UsersConfigError(f"{origin} must be a JSON object {{token: user}}")
    users: dict[str, AuthUser] = {}
    for number, (token, user) in enumerate(raw.items(), start=1):
        where = f"{origin}, user {number}"  # never the token itself
        if not token.strip():
            raise UsersConfigError(f"{where}: the token is empty")
        if not isinstance(user, dict):
            raise UsersConfigError(f"{where}: expected {{identity, permissions}}")
        identity = user.get("identity")
        if not isinstance(identity, str) or not identity.strip():
            raise UsersConfigError(f"{where}: identity must be a non-empty string")
        permissions = user.get("permissions", [])
        if not isinstance(permissions, list) or not all(
            isinstance(p, str) and p for p in permissions
        ):
            raise UsersConfigError(f"{where}: permissions must be a list of strings")
        users[token] = AuthUser(identity=identity.strip(), permissions=list(permissions))
    return users
