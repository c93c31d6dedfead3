"""A ready auth recipe for the LangGraph server: bearer-token users, thread owners, approvers.

Enable it in a ``langgraph.json`` (the project's own does not: plain ``langgraph dev`` keeps
working without users)::

    {
      "dependencies": ["."],
      "graphs": {"planexec": "./src/planexec/served.py:graph"},
      "env": ".env",
      "auth": {"path": "planexec.auth:auth", "disable_studio_auth": true}
    }

and give the server its users, by token, in ``$PLANEXEC_AUTH_USERS`` (JSON text) or in a JSON
file named by ``$PLANEXEC_AUTH_FILE`` (:mod:`planexec.auth.users`)::

    PLANEXEC_AUTH_USERS='{"tok-alice": {"identity": "alice"},
                          "tok-bob": {"identity": "bob", "permissions": ["approve"]}}'

A client sends ``Authorization: Bearer <token>`` (``get_client(url=...,
headers={"Authorization": "Bearer tok-alice"})``). A missing or unknown token is refused with
401 (``unknown or missing bearer token``); tokens are compared in constant time and never
logged. ``"disable_studio_auth": true`` matters: without it, ``langgraph dev`` lets any request
that sends ``x-auth-scheme: langsmith`` in as an unauthenticated Studio user, which this recipe
then refuses everywhere (403) rather than trusting.

What each user may do:

- **threads**: creating one stamps ``metadata["owner"]`` with the creator's identity (a client
  cannot choose it, nor change it later: 403 ``the owner of a thread cannot be changed``).
  Reading a thread (its state, history, runs), searching, updating it (state edits, run
  cancels) and starting or resuming runs on it are allowed to its owner and to users with the
  permission ``approve``; to anyone else the thread does not exist (404). Deleting a thread
  is its owner's alone.
- **assistants**: any authenticated user may read and search them; creating, changing or
  deleting one needs the permission ``admin``.
- **everything else** (crons, the store's API): the permission ``admin``.

The graph then knows who asks: the server puts the user in each run's
``config["configurable"]["langgraph_auth_user"]`` (and its permissions in
``langgraph_auth_permissions``), which :mod:`planexec.review.identity` reads, so each decision
names ``{"id": "bob", "source": "server"}`` and the operator's rules (``PLANEXEC_APPROVERS=
permission:approve``...) can use the permissions granted here.
"""

from __future__ import annotations

import logging

from langgraph_sdk import Auth

from planexec.auth.users import (
    USERS_ENV,
    USERS_FILE_ENV,
    AuthUser,
    UsersConfigError,
    load_users,
    user_of_token,
)

__all__ = [
    "ADMIN_PERMISSION",
    "APPROVE_PERMISSION",
    "OWNER_KEY",
    "USERS_ENV",
    "USERS_FILE_ENV",
    "AuthUser",
    "UsersConfigError",
    "auth",
    "load_users",
]

APPROVE_PERMISSION = "approve"
"""The permission that lets a user read, resume and answer every thread, not only their own."""
ADMIN_PERMISSION = "admin"
"""The permission needed for assistants' changes, crons and the store's API."""
OWNER_KEY = "owner"
"""The thread metadata key holding the identity of the user who created the thread."""

_log = logging.getLogger(__name__)

auth = Auth()
"""The ``langgraph_sdk.Auth`` object ``langgraph.json`` names as ``planexec.auth:auth``."""


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """Return the user whose ``Authorization: Bearer <token>`` this is; else refuse with 401."""
    try:
        users = load_users()
    except UsersConfigError as error:
        _log.error("%s", error)
        raise Auth.exceptions.HTTPException(
            status_code=500, detail="server auth is not configured"
        ) from None
    scheme, _, token = (authorization or "").strip().partition(" ")
    user = user_of_token(token.strip(), users) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401,
            detail="unknown or missing bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Auth.types.MinimalUserDict(
        identity=user["identity"],
        display_name=user["identity"],
        is_authenticated=True,
        permissions=user["permissions"],
    )


def _member(ctx: Auth.types.AuthContext) -> str:
    """Return the identity of an authenticated user; refuse anyone else (Studio's bypass)."""
    identity = getattr(ctx.user, "identity", "")
    if not getattr(ctx.user, "is_authenticated", False) or not identity:
        raise Auth.exceptions.HTTPException(status_code=403, detail="not an authenticated user")
    return str(identity)


def _owner_or_approver(ctx: Auth.types.AuthContext) -> Auth.types.FilterType | None:
    """No filter for approvers (every thread); else only the threads the user owns."""
    identity = _member(ctx)
    if APPROVE_PERMISSION in ctx.permissions:
        return None
    return {OWNER_KEY: identity}


@auth.on
async def only_admins(ctx: Auth.types.AuthContext, value: object) -> bool:
    """Require ``admin`` for everything no handler below names (crons, the store's API)."""
    _member(ctx)
    return ADMIN_PERMISSION in ctx.permissions


@auth.on.threads.create
async def on_thread_create(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsCreate
) -> Auth.types.FilterType:
    """Stamp the new thread with its owner, whatever owner the client asked for."""
    identity = _member(ctx)
    metadata = value.setdefault("metadata", {})
    metadata[OWNER_KEY] = identity
    return {OWNER_KEY: identity}


@auth.on.threads.create_run
async def on_run_create(
    ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate
) -> Auth.types.FilterType | None:
    """Allow runs (and resumes) on a thread to its owner and approvers; stamp new threads."""
    identity = _member(ctx)
    metadata = value.get("metadata")
    if isinstance(metadata, dict):  # the metadata of a thread this run creates, if it does
        metadata[OWNER_KEY] = identity
    return _owner_or_approver(ctx)


@auth.on.threads.read
async def on_thread_read(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsRead
) -> Auth.types.FilterType | None:
    """Show a thread, its state, history and runs to its owner and approvers."""
    return _owner_or_approver(ctx)


@auth.on.threads.search
async def on_thread_search(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsSearch
) -> Auth.types.FilterType | None:
    """List only the threads the user may read."""
    return _owner_or_approver(ctx)


@auth.on.threads.update
async def on_thread_update(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsUpdate
) -> Auth.types.FilterType | None:
    """Allow updates (state edits, metadata, run cancels) to owner and approvers; keep the owner."""
    identity = _member(ctx)
    metadata = value.get("metadata") or {}
    if OWNER_KEY in metadata and metadata[OWNER_KEY] != identity:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="the owner of a thread cannot be changed"
        )
    return _owner_or_approver(ctx)


@auth.on.threads.delete
async def on_thread_delete(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsDelete
) -> Auth.types.FilterType:
    """Let only its owner delete a thread (or one of its runs)."""
    return {OWNER_KEY: _member(ctx)}


@auth.on.assistants.read
async def on_assistant_read(ctx: Auth.types.AuthContext, value: Auth.types.AssistantsRead) -> None:
    """Let any authenticated user read an assistant (runs need it)."""
    _member(ctx)


@auth.on.assistants.search
async def on_assistant_search(
    ctx: Auth.types.AuthContext, value: Auth.types.AssistantsSearch
) -> None:
    """Let any authenticated user search the assistants."""
    _member(ctx)
