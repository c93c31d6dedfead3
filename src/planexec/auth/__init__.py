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

- **threads**: creating one stamps ``metadata["owner"]`` with the creator's identity. A client
  cannot choose it, and nobody (approvers and admins included) changes it later: an update
  naming ``owner`` is refused with 403 (:data:`OWNER_FIXED`). Reading a thread (its state,
  history, runs), searching, updating it (state edits, run cancels) and starting or resuming
  runs on it are allowed to its owner and to users with the permission ``approve``; to anyone
  else the thread does not exist (404). Deleting a thread is its owner's (or an admin's).
- **the decision trail**: deleting a run, cancelling one with ``action="rollback"`` or starting
  one with ``multitask_strategy="rollback"`` deletes checkpoints and the decisions in them:
  ``admin`` only (403 :data:`RUN_DELETE_REFUSED`, :data:`ROLLBACK_REFUSED`).
- **forks**: a run from a past checkpoint (``checkpoint_id``) and ``threads.copy`` can replay a
  plan approved once: approvers and admins only (403 :data:`FORK_REFUSED`,
  :data:`COPY_REFUSED`). The server does not tell the recipe the checkpoint of a state edit
  (``threads.update_state(..., checkpoint_id=...)``), so that fork is not refused here.
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
    "COPY_REFUSED",
    "FORK_REFUSED",
    "OWNER_FIXED",
    "OWNER_KEY",
    "ROLLBACK_REFUSED",
    "RUN_DELETE_REFUSED",
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

OWNER_FIXED = "the owner of a thread is set when it is created and cannot be changed"
"""Why an update naming ``metadata["owner"]`` is refused (403), for everyone."""
RUN_DELETE_REFUSED = (
    "deleting a run erases its part of the decision trail: only a user with the permission"
    " 'admin' may"
)
"""Why deleting a run is refused (403) to everyone but admins."""
ROLLBACK_REFUSED = (
    "a rollback deletes a run and its checkpoints (its decisions too): only a user with the"
    " permission 'admin' may"
)
"""Why ``multitask_strategy="rollback"`` or a cancel with ``action="rollback"`` is refused."""
FORK_REFUSED = (
    "a run from a past checkpoint forks the thread and can replay a plan approved once: only"
    " users with the permission 'approve' (or 'admin') may"
)
"""Why a run naming a checkpoint (time travel, fork) is refused (403) to non-approvers."""
COPY_REFUSED = (
    "a copy forks the thread with its approved state: only users with the permission"
    " 'approve' (or 'admin') may copy a thread"
)
"""Why ``threads.copy`` is refused (403) to non-approvers."""

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


def _admin_only(ctx: Auth.types.AuthContext, why: str) -> None:
    """Refuse (403, saying ``why``) anyone without the permission ``admin``."""
    if ADMIN_PERMISSION not in ctx.permissions:
        raise Auth.exceptions.HTTPException(status_code=403, detail=why)


def _approver_or_admin(ctx: Auth.types.AuthContext, why: str) -> None:
    """Refuse (403, saying ``why``) anyone with neither ``approve`` nor ``admin``."""
    if not {APPROVE_PERMISSION, ADMIN_PERMISSION} & set(ctx.permissions):
        raise Auth.exceptions.HTTPException(status_code=403, detail=why)


def _checkpoint_named(value: Auth.types.RunsCreate) -> bool:
    """Whether a run starts from a named checkpoint rather than the thread's latest one.

    The server folds ``checkpoint_id``, ``checkpoint`` and the context into the run's
    ``config["configurable"]`` before asking this recipe, so that is the one place to look.
    """
    kwargs = value.get("kwargs") or {}
    config = kwargs.get("config") if isinstance(kwargs, dict) else None
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return isinstance(configurable, dict) and bool(configurable.get("checkpoint_id"))


@auth.on
async def only_admins(ctx: Auth.types.AuthContext, value: object) -> bool:
    """Require ``admin`` for everything no handler below names (crons, the store's API)."""
    _member(ctx)
    return ADMIN_PERMISSION in ctx.permissions


@auth.on.threads.create
async def on_thread_create(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsCreate
) -> Auth.types.FilterType:
    """Stamp the new thread with its owner, whatever owner the client asked for.

    ``threads.copy`` arrives here too, as a create event without metadata (the copy keeps the
    original's metadata and checkpoints): a copy forks the thread's approved state, so only
    approvers and admins may make one.
    """
    identity = _member(ctx)
    if "metadata" not in value:
        _approver_or_admin(ctx, COPY_REFUSED)
    metadata = value.setdefault("metadata", {})
    metadata[OWNER_KEY] = identity
    return {OWNER_KEY: identity}


@auth.on.threads.create_run
async def on_run_create(
    ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate
) -> Auth.types.FilterType | None:
    """Allow runs (and resumes) on a thread to its owner and approvers; stamp new threads.

    A run from a named checkpoint (``checkpoint_id``/``checkpoint``, or a ``checkpoint_id`` in
    the context or configurable) forks the thread's history and would replay a plan approved
    once: only approvers and admins may start one. ``multitask_strategy="rollback"`` deletes
    the running run's checkpoints (decisions with them): admins only.
    """
    identity = _member(ctx)
    if value.get("multitask_strategy") == "rollback":
        _admin_only(ctx, ROLLBACK_REFUSED)
    if _checkpoint_named(value):
        _approver_or_admin(ctx, FORK_REFUSED)
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
    """Allow updates (state edits, metadata, run cancels) to owner and approvers; keep the owner.

    Nobody, approvers and admins included, names the owner key in an update (the handler
    cannot see the thread's current owner, so even an unchanged value is refused), and only
    an admin may cancel a run with ``action="rollback"`` (that deletes the run's checkpoints).
    """
    _member(ctx)
    metadata = value.get("metadata") or {}
    if OWNER_KEY in metadata:
        raise Auth.exceptions.HTTPException(status_code=403, detail=OWNER_FIXED)
    if value.get("action") == "rollback":
        _admin_only(ctx, ROLLBACK_REFUSED)
    return _owner_or_approver(ctx)


@auth.on.threads.delete
async def on_thread_delete(
    ctx: Auth.types.AuthContext, value: Auth.types.ThreadsDelete
) -> Auth.types.FilterType | None:
    """Let its owner (or an admin) delete a whole thread; deleting one run is an admin's alone."""
    identity = _member(ctx)
    if value.get("run_id") is not None:
        _admin_only(ctx, RUN_DELETE_REFUSED)
    if ADMIN_PERMISSION in ctx.permissions:
        return None
    return {OWNER_KEY: identity}


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
