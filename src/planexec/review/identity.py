"""Who answers, who started a run, and what the server lets them do: the one place identity is read.

Rules, in order:

1. On the LangGraph server (it sets ``langgraph_auth_user_id`` in every run's configurable,
   and strips it from what clients send): the user its auth vouched for
   (``{"id": "alice", "source": "server"}``); without auth (plain ``langgraph dev``), or a
   user that is not authenticated (Studio's bypass), ``{"id": None, "source": "unknown"}``.
   There, nothing a client sends is believed: neither ``planexec_caller`` nor an answer's
   ``"by"``.
2. ``config["configurable"]["planexec_caller"] = {"id": "alice", "source": "cli"}``: set by
   planexec's command line (the local OS user), or by a Python caller (``"source"``: ``cli``
   or ``python``, the default; a bare ``"alice"`` is ``{"id": "alice", "source": "python"}``).
3. A Python caller's answer ``{"action": "approve", "by": "alice"}``:
   ``{"id": "alice", "source": "python"}``.
4. Else ``{"id": None, "source": "unknown"}``.

An identity a caller names (rules 2 and 3) is at most :data:`MAX_ID_CHARS` printable characters
(no newline, no control character); another is never recorded: :func:`identity_problem` says
why, and the nodes refuse the answer with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from planexec.state import Identity, IdentitySource

CALLER_KEY = "planexec_caller"
"""The configurable key a local caller (the CLI, a Python program) names itself with."""
BY_KEY = "by"
"""The answer field a Python caller names who answers with (ignored on the server)."""
SERVER_USER_ID = "langgraph_auth_user_id"
SERVER_USER = "langgraph_auth_user"
SERVER_PERMISSIONS = "langgraph_auth_permissions"
UNKNOWN = Identity(id=None, source="unknown")
MAX_ID_CHARS = 128
"""The longest identity a caller may name (``planexec_caller`` or an answer's ``"by"``)."""
BAD_ID = f"by: at most {MAX_ID_CHARS} printable characters"
"""Why an answer naming another identity is refused."""


def policy_identity(policy: str) -> Identity:
    """Return who approved a plan the approval policy let run unasked."""
    return Identity(id=f"policy:{policy}", source="policy")


def on_server(config: RunnableConfig | None) -> bool:
    """Tell whether this run was started by the LangGraph server (which sets its auth keys)."""
    return SERVER_USER_ID in _configurable(config)


def who_started(config: RunnableConfig | None) -> Identity:
    """Return who started the run of ``config`` (rules 1, 2 and 4)."""
    return who_answers(config, None)


def who_answers(config: RunnableConfig | None, answer: object) -> Identity:
    """Return who sent ``answer`` in the run of ``config``: THE function that says who it is."""
    return _claimed(config, answer)[0]


def identity_problem(config: RunnableConfig | None, answer: object) -> str | None:
    """Return why the identity a caller names for ``answer`` is not taken (:data:`BAD_ID`), or None.

    On the server nothing a client names is read, so nothing is refused there.
    """
    return _claimed(config, answer)[1]


def _claimed(config: RunnableConfig | None, answer: object) -> tuple[Identity, str | None]:
    configurable = _configurable(config)
    if SERVER_USER_ID in configurable:
        return _server_identity(configurable), None
    named = configurable.get(CALLER_KEY)
    if isinstance(named, Mapping):
        named = named.get("id")
    if isinstance(named, str) and named.strip():
        caller = _caller(configurable.get(CALLER_KEY))
        return (caller, None) if caller is not None else (UNKNOWN, BAD_ID)
    if isinstance(answer, Mapping):
        by = answer.get(BY_KEY)
        if isinstance(by, str) and by.strip():
            if not _fits(by.strip()):
                return UNKNOWN, BAD_ID
            return Identity(id=by.strip(), source="python"), None
    return UNKNOWN, None


def _fits(name: str) -> bool:
    return len(name) <= MAX_ID_CHARS and name.isprintable()


def permissions_of(config: RunnableConfig | None) -> frozenset[str]:
    """Return the permissions the server's auth granted the run's user (none off the server)."""
    configurable = _configurable(config)
    if SERVER_USER_ID not in configurable or _server_identity(configurable)["id"] is None:
        return frozenset()
    granted = configurable.get(SERVER_PERMISSIONS) or []
    if not isinstance(granted, list | tuple | set | frozenset):
        return frozenset()
    return frozenset(str(p) for p in granted)


def without_by(answer: Any) -> Any:
    """Return the answer without its ``"by"`` (read by :func:`who_answers`, nothing else)."""
    if isinstance(answer, Mapping) and BY_KEY in answer:
        return {k: v for k, v in answer.items() if k != BY_KEY}
    return answer


def describe_identity(who: Identity) -> str:
    """Name an identity in a message: its id, or ``an unknown caller``."""
    return who["id"] if who["id"] is not None else "an unknown caller"


def _configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    configurable = (config or {}).get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def _server_identity(configurable: Mapping[str, Any]) -> Identity:
    user = configurable.get(SERVER_USER)
    if isinstance(user, Mapping):  # a serialized user
        identity, authenticated = user.get("identity"), user.get("is_authenticated", True)
    else:
        identity = getattr(user, "identity", None)
        authenticated = getattr(user, "is_authenticated", True)
    if not isinstance(identity, str) or not identity or authenticated is False:
        return UNKNOWN
    return Identity(id=identity, source="server")


def _caller(caller: object) -> Identity | None:
    if isinstance(caller, str) and caller.strip():
        return Identity(id=caller.strip(), source="python") if _fits(caller.strip()) else None
    if not isinstance(caller, Mapping):
        return None
    name = caller.get("id")
    if not isinstance(name, str) or not name.strip() or not _fits(name.strip()):
        return None
    return Identity(id=name.strip(), source=_local_source(name.strip(), caller.get("source")))


def _local_source(name: str, said: object) -> IdentitySource:
    """Return the source a local caller names: ``cli``, ``policy`` or ``python``.

    ``policy`` only for a ``policy:`` id (a program deciding by rule: ``planexec eval``); never
    ``server``.
    """
    if said == "cli":
        return "cli"
    return "policy" if said == "policy" and name.startswith("policy:") else "python"
