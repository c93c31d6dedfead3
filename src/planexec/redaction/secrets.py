"""Which values are secrets, and scrubbing them out of data and text.

Secrets are the values of environment variables whose names mark them (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*_PASS``, ``*DSN*``...), the passwords inside
URL-valued environment variables (``DATABASE_URL=postgresql://user:pw@host/db``), and values
the process registers (the password of a ``--db`` URL). planexec never copies them into
state; whatever a model or a tool produces is scrubbed of them before anything records it
(see :mod:`planexec.llm.scrubbed`), so a tool that echoes its environment, an error that quotes a
key or a model that repeats one shows ``[redacted]`` instead.
"""

from __future__ import annotations

import os
import re
import string
import threading
from collections.abc import Iterator
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

# scheme://user:PASSWORD@host: the password runs to the last "@" before the next whitespace
# (so a raw "@" in it stays inside; it may hold / ? #). Found by url_password_spans, not a
# regex: a regex for it backtracks quadratically on long runs (12 s on 100 KB of letters).
SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
USER = re.compile(r"[^\s:/?#@]*")
NON_SPACE = re.compile(r"\S*")
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
    raws = [text[start:end] for start, end in url_password_spans(text)]
    raws += [match.group("pw") for match in QUERY_PASSWORD.finditer(text)]
    found: set[str] = set()
    for raw in raws:
        if len(raw) > 1 and raw[0] == raw[-1] == "'":  # libpq's quoted value
            raw = raw[1:-1]
        found.update({raw, unquote(raw), *re.split(r"[@:/?#]", raw)})
    rest = mask_urls(text)
    return sorted(p for p in found if p and p not in rest)


def mask_urls(text: str) -> str:
    """Replace the passwords of URLs in ``text`` with ``***`` (``postgresql://u:***@host/db``)."""
    parts, done = [], 0
    for start, end in url_password_spans(text):
        parts += [text[done:start], MASK]
        done = end
    text = "".join(parts) + text[done:]
    return QUERY_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK}", text)


def url_password_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yield where the password of each ``scheme://user:PASSWORD@host`` in ``text`` is.

    The scheme is letters, digits and ``+.-`` starting with a letter, the user holds none of
    ``:/?#@`` or whitespace, and the password runs to the last ``@`` of its run of non-space
    characters. Linear in ``len(text)``: each character is looked at a bounded number of times.
    """
    pos = 0
    run_end = last_at = -1  # the non-space run last measured, and the last "@" in it
    while (sep := text.find("://", pos)) != -1:
        pos = sep + 3
        start = sep
        while start > 0 and text[start - 1] in SCHEME_CHARS:
            start -= 1
        if not any(c in string.ascii_letters for c in text[start:sep]):
            continue
        user_end = _match_end(USER, text, pos)
        if not text.startswith(":", user_end):
            continue
        password = user_end + 1
        if password > run_end:  # a new run: measure it once, not once per "://" inside it
            run_end = _match_end(NON_SPACE, text, password)
            last_at = text.rfind("@", password, run_end)
        if last_at < password:  # no "@" after it in this run, nor after any later "://"
            pos = max(pos, run_end)
            continue
        yield password, last_at
        pos = last_at + 1


def _match_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    match = pattern.match(text, pos)
    return match.end() if match else pos


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
