"""Which values are secrets, and scrubbing them out of data and text.

Secrets are the values of environment variables whose names mark them (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*_PASS``, ``*DSN*``...), the passwords inside
URL-valued environment variables (``DATABASE_URL=postgresql://user:pw@host/db``), and values
the process registers (the password of a ``--db`` URL). planexec never copies them into
state; whatever a model or a tool produces is scrubbed of them before anything records it
(see :mod:`planexec.scrubbed`), so a tool that echoes its environment, an error that quotes a
key or a model that repeats one shows ``[redacted]`` instead.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel

SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|DSN|(^|_)PASS($|_)", re.IGNORECASE
)
MIN_SECRET_LENGTH = 8
MIN_REGISTERED_LENGTH = 4
REDACTED = "[redacted]"
MASK = "***"

# scheme://user:PASSWORD@host: the password runs to the last "@" before the path, so a raw "@"
# in it stays inside; and ?password=... / &sslpassword=... query parameters.
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*):(?P<pw>\S*)@")
"""``scheme://user:PASSWORD@host``: the password runs to the last ``@`` (it may hold / ? #)."""
QUERY_PASSWORD = re.compile(
    r"(?P<head>(?:[?&]|\b)(?:ssl)?pass(?:word)?\s*=\s*)(?P<pw>'[^']*'|[^&#\s]*)", re.I
)
"""``?password=PASSWORD`` in a URL, or ``password=PASSWORD`` in a libpq keyword string."""

_registered: set[str] = set()
_registered_lock = threading.Lock()


def url_passwords(text: str) -> list[str]:
    """Return the passwords written inside URLs in ``text``: as written, decoded, and by parts.

    The parts (split at ``@`` and ``:``) are what a URL parser that reads the URL differently
    may quote back in an error message. A password that also appears in the rest of the text
    (``postgres://postgres:postgres@...``) is left out: replacing it would garble the text,
    and such a password hides nothing.
    """
    found: set[str] = set()
    for pattern in (URL_PASSWORD, QUERY_PASSWORD):
        for match in pattern.finditer(text):
            raw = match.group("pw")
            if len(raw) > 1 and raw[0] == raw[-1] == "'":  # libpq's quoted value
                raw = raw[1:-1]
            found.update({raw, unquote(raw), *re.split(r"[@:/?#]", raw)})
    rest = mask_urls(text)
    return sorted(p for p in found if p and p not in rest)


def mask_urls(text: str) -> str:
    """Replace the passwords of URLs in ``text`` with ``***`` (``postgresql://u:***@host/db``)."""
    text = URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    return QUERY_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK}", text)


def register_secret(value: str) -> None:
    """Treat ``value`` as a secret for the rest of the process.

    Values under 4 characters are ignored: replacing them everywhere would garble text.
    """
    if len(value) >= MIN_REGISTERED_LENGTH:
        with _registered_lock:
            _registered.add(value)


def register_url_secrets(url: str) -> None:
    """Treat the passwords inside ``url`` (a database URL given on the command line) as secrets."""
    for password in url_passwords(url):
        register_secret(password)


def secret_values() -> list[str]:
    """Return every known secret value, longest first (so a longer one is replaced whole)."""
    found: set[str] = set()
    for name, value in os.environ.items():
        if SECRET_NAME.search(name):
            found.add(value)
        if "://" in value:
            found.update(url_passwords(value))
    found = {value for value in found if len(value) >= MIN_SECRET_LENGTH}
    with _registered_lock:
        found |= _registered
    return sorted(found, key=len, reverse=True)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """Replace every secret inside a value with ``[redacted]``, leaving the value's shape.

    Strings, dict keys and values, lists, tuples and pydantic models (LangChain messages,
    generations) are rewritten; other values are returned as they are.
    """
    known = secret_values() if secrets is None else secrets
    if not known:
        return value
    return _redact(value, known)


def _redact(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        for secret in known:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {_redact(k, known): _redact(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, known) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact(v, known) for v in value)
    if isinstance(value, BaseModel):
        fields = {k: _redact(v, known) for k, v in vars(value).items()}
        return value.model_copy(update=fields)
    return value


def scrub_text(text: str, secrets: list[str] | None = None) -> str:
    """Return text fit to print: URL passwords masked, then every secret value replaced."""
    result: str = redact(mask_urls(text), secrets)
    return result
