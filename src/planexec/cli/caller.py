"""Who the ``planexec`` command speaks for: the local OS user, and how an identity is shown."""

from __future__ import annotations

import getpass
from collections.abc import Mapping

from planexec.runs import Caller


def local_user() -> Caller | None:
    """Return the local OS user as the CLI's caller (``source`` ``cli``); None if it has none.

    ``getpass.getuser()``: ``$LOGNAME``, ``$USER``, ``$LNAME``, ``$USERNAME``, else the
    password database. Without a caller the approval records the answer's identity as unknown.
    """
    try:
        name = getpass.getuser()
    except (OSError, KeyError):  # no such variable and no entry in the password database
        return None
    return {"id": name, "source": "cli"} if name else None


def who(identity: Mapping[str, object] | None) -> str:
    """Return an identity as people read it: ``alice (cli)``, ``unknown (server)``, ``unknown``."""
    found = identity or {}
    name, source = found.get("id"), found.get("source") or "unknown"
    if source == "unknown":
        return str(name) if name else "unknown"
    return f"{name if name else 'unknown'} ({source})"
