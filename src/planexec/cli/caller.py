"""Who the ``planexec`` command speaks for: the local OS user, and how an identity is shown."""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping

from planexec.runs import Caller


def local_user() -> Caller | None:
    """Return the local OS user as the CLI's caller (``source`` ``cli``); None if it has none.

    The account the process runs as, from the password database (``pwd``): not ``$LOGNAME``
    or ``$USER``, which anyone can set. Where there is no ``pwd`` (Windows), or the account has
    no entry in it, ``getpass.getuser()``. Without a caller the approval records the answer's
    identity as unknown.
    """
    name = _account_name()
    return {"id": name, "source": "cli"} if name else None


def _account_name() -> str | None:
    try:
        import pwd
    except ImportError:  # no password database on this system
        pass
    else:
        try:
            return pwd.getpwuid(os.getuid()).pw_name
        except KeyError:  # the account has no entry: fall back to the environment
            pass
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no such variable and no entry in the password database
        return None


def who(identity: Mapping[str, object] | None) -> str:
    """Return an identity as people read it: ``alice (cli)``, ``unknown (server)``, ``unknown``."""
    found = identity or {}
    name, source = found.get("id"), found.get("source") or "unknown"
    if source == "unknown":
        return str(name) if name else "unknown"
    return f"{name if name else 'unknown'} ({source})"
