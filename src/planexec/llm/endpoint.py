r"""A URL fit to show in a message: the endpoint a provider error names, a refused base URL.

A bad base URL (``OPENAI_BASE_URL``, ``base_url=``) fails every call the same way ("Connection
error."); the error is only useful if it says which URL the client tried. :func:`shown_url` is
the one place that writes a URL into a message, by one strict rule: what is shown is
``scheme://host[:port]`` and the path's parts that are plain words; every other path part is
``***``. A path part is a plain word when it is made of ASCII letters, digits, ``.``, ``-`` and
``_`` only (no ``=``, ``%``, ``:``, nothing else), is at most 32 characters long, does not look
like a key (:func:`key_like`), and does not follow a part that names a secret (``key``,
``api-key``, ``token``, ``secret``, ``password``, ``passwd``, ``pwd``, ``sig``, ``signature``,
``auth``, ``bearer``, ``credential``, ``session``, in any case and with any separators). The
user name and password, the query, the fragment and each part's ``;params`` are never shown; a
host label that looks like a key is masked; any secret value left is scrubbed
(:func:`planexec.redaction.secrets.scrub_text`). So ``/v1/chat/completions`` or
``/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions`` show whole, and
``/v1/key/Xk29fj3LmQ`` shows as ``/v1/key/***``. A URL it cannot read shows as its scheme and
host, or as ``(a URL that cannot be parsed)``.

:func:`urls_shown` finds the URLs inside a provider's words and shows each so; a URL whose user
and host cannot be told apart (a space, a quote or a ``\`` before its ``@``, an ``@`` in its
path, a port that is not digits) shows as ``scheme://***``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from planexec.redaction.secrets import MASK, SECRET_NAME, scrub_text

UNPARSEABLE = "(a URL that cannot be parsed)"
"""What a URL shows as when not even its host can be read."""
KEY_RUN = re.compile(r"[A-Za-z0-9]{16,}")
"""A run of letters and digits long enough to be a key when it mixes both (``sk-proj-…``)."""
LONG_RUN = re.compile(r"[A-Za-z0-9]{24,}")
"""A run of letters or digits too long to be a word: a key whatever it is made of."""
KEY_PREFIX = re.compile(
    r"(?:sk[-_]|[pr]k_|gsk_|xai-|hf_|gh[opsu]_|github_pat_|glpat-|xox[abpr]-|AIza)[A-Za-z0-9]"
)
"""How providers' keys start (OpenAI's ``sk-``, Groq's ``gsk_``, GitHub's ``ghp_``…)."""
NAMED_VALUE = re.compile(rf"(?:{SECRET_NAME.pattern})[-_=:][A-Za-z0-9]", re.IGNORECASE)
"""A word that names a secret (the environment's rule: ``key``, ``token``, ``auth``…) joined
to a value: ``key-Ab3…``, ``api_key=…``, ``token:…`` (not ``api-keys``, a page's name)."""
SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
"""What a scheme is written with: a URL inside a message starts at the first letter of a run of
them right before ``://`` (found from each ``://``, so a long run of letters costs no time)."""
URL_END = re.compile(r"[\s'\"<>`]")
"""What ends a URL inside a message: a space or a quote."""
AUTHORITY_END = re.compile(r"[/?#\n]")
"""What ends a URL's user, host and port: its path, query or fragment (or the line's end)."""
MAX_URLS_SHOWN = 64
"""How many URLs of one message are shown (each costs a scrub); the rest show as
``scheme://***``, so a message holding a million URLs costs no time."""
AUTHORITY_LOOKAHEAD = 1024
"""How far past a URL's start an ``@`` (the end of a user and password) is looked for."""
PLAIN_WORD = re.compile(r"[A-Za-z0-9._-]{1,32}")
"""A path part that may be shown: ASCII letters, digits, ``.``, ``-``, ``_``; 32 at most."""
NAMES_SECRET = re.compile(
    r"(?:key|token|secret|password|passwd|pwd|sig|signature|auth|bearer|credential|session)s?$",
    re.IGNORECASE,
)
"""How a path part naming a secret ends (``api-key``, ``x_auth_token``; separators left out):
the part after it is the secret."""
UPPER_WORD = re.compile(r"[A-Za-z0-9]{8,}")
"""A word of 8+ letters and digits: a key when it mixes digits with upper case letters."""
MIXED_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,}")
"""A dash- or underscore-joined run that is a key when it mixes upper, lower case and digits."""
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}")
HOST = re.compile(r"[a-z0-9._-]+|\[[0-9a-f:.]+\]")
PORT = re.compile(r"[0-9]{1,5}")
AFTER_USER = re.compile(r"(?:[^/?#]*@)?(?P<host>[^/?#:@]*)")


def endpoint_of(exc: BaseException) -> str | None:
    """Return the endpoint a failed request went to, fit to show; None if the error has none.

    Reads the request an HTTP client's error carries (openai's, anthropic's and httpx's errors
    have ``request.url``).
    """
    try:
        request = getattr(exc, "request", None)  # httpx raises RuntimeError when it has none
    except RuntimeError:
        return None
    url = getattr(request, "url", None)
    return shown_url(str(url)) if url is not None else None


def shown_url(url: str) -> str:
    """Return ``url`` fit to show in a message: ``scheme://host:port/path``, keys masked.

    See the module's docstring. A URL written without a scheme (``localhost:8000/v1``) shows
    without one; a port is shown as written when it is digits, even out of range, since the
    message may be about it.
    """
    text = url.strip()
    has_scheme = "://" in text
    try:
        parts = urlsplit(text if has_scheme else f"//{text}")
        host = parts.hostname
    except ValueError:  # a malformed IPv6 host
        return scrub_text(_scheme_and_host(text))
    if not host or not HOST.fullmatch(_bracketed(host)):
        return scrub_text(_scheme_and_host(text))
    scheme = parts.scheme if _plain_scheme(parts.scheme) else ""
    where = ".".join(MASK if key_like(label, host=True) else label for label in host.split("."))
    port = _port_text(parts.netloc)
    path = _shown_path(parts.path)
    head = f"{scheme}://" if has_scheme and scheme else ""
    return scrub_text(f"{head}{_bracketed(where)}{f':{port}' if port else ''}{path}")


def urls_shown(text: str) -> str:
    """Return ``text`` (an error's words) with each URL in it as :func:`shown_url` shows it.

    A URL whose user and host cannot be told apart shows as ``scheme://***`` (see the module's
    docstring), with all of it up to the end of the word holding its last ``@``; so do the URLs
    after the first :data:`MAX_URLS_SHOWN`.
    """
    separators = [found.start() for found in re.finditer("://", text)]
    out: list[str] = []
    done = 0
    for index, separator in enumerate(separators):
        begin = _scheme_start(text, separator, done)
        if begin is None:  # inside a URL already shown, or no scheme before "://"
            continue
        upcoming = separators[index + 1] if index + 1 < len(separators) else len(text)
        out.append(text[done:begin])
        shown, done = _shown_in_text(
            text, begin, separator, upcoming, in_full=index < MAX_URLS_SHOWN
        )
        out.append(shown)
    out.append(text[done:])
    return "".join(out)


def _scheme_start(text: str, separator: int, done: int) -> int | None:
    """Return where the scheme before ``text[separator:]`` (a ``://``) starts, None if none."""
    if separator < done:
        return None
    begin = separator
    while begin > done and text[begin - 1] in SCHEME_CHARS:
        begin -= 1
    while begin < separator and not ("a" <= text[begin].lower() <= "z"):
        begin += 1
    return begin if begin < separator else None


def _shown_in_text(
    text: str, begin: int, separator: int, upcoming: int, *, in_full: bool = True
) -> tuple[str, int]:
    """Return the URL at ``text[begin:]`` as shown, and where it ends in ``text``.

    Its user and password end at the last ``@`` before its path, looked for up to the next
    URL's ``://`` (``upcoming``) and at most :data:`AUTHORITY_LOOKAHEAD` characters on.
    """
    scheme, after = text[begin:separator], separator + len("://")
    end = _search_end(URL_END, text, after, len(text))
    authority_end = _search_end(
        AUTHORITY_END, text, after, min(upcoming, after + AUTHORITY_LOOKAHEAD)
    )
    at = text.rfind("@", after, authority_end)
    if at >= end:  # an "@" past a space or a quote: the password holds one
        return _masked_url(scheme), _search_end(URL_END, text, at, len(text))
    url = text[begin:end]
    trail = len(url) - len(url.rstrip(".,;:!?)]}"))  # the sentence's, not the URL's
    url, end = url[: len(url) - trail], end - trail
    if not in_full or _unclear_authority(text[after:end]):
        return _masked_url(scheme), end
    return shown_url(url), end


def _search_end(pattern: re.Pattern[str], text: str, start: int, stop: int) -> int:
    found = pattern.search(text, start, min(stop, len(text)))
    return found.start() if found else min(stop, len(text))


def _unclear_authority(rest: str) -> bool:
    """Whether a URL (after its ``://``) leaves its user and host unclear."""
    authority, _, path = rest.partition("/")
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    host_port = re.split(r"[?#]", authority, maxsplit=1)[0].rpartition("@")[2]
    port = host_port.rpartition("]")[2].partition(":")[2] if ":" in host_port else ""
    return "\\" in authority or "@" in path or bool(port and not PORT.fullmatch(port))


def _masked_url(scheme: str) -> str:
    return f"{scheme if _plain_scheme(scheme) else MASK}://{MASK}"


def key_like(text: str, *, host: bool = False) -> bool:
    """Return whether ``text`` (a path part; a host label if ``host``) looks like a key.

    It does when it starts like a provider's key (``sk-``, ``gsk_``, ``ghp_``…), holds a run
    of 16+ letters and digits mixing both or of 24+ of either, a word of 8+ letters and digits
    mixing upper case and digits (``Zk81mMnq.…``, ``ZK81MMNQ-…``), or a 16+ run joined by ``-``
    or ``_`` that mixes upper case, lower case and digits. A path part also does when a word that
    names a secret (the environment's rule, :data:`planexec.redaction.secrets.SECRET_NAME`:
    ``key``, ``token``, ``auth``…) is joined to a value (``key-…``, ``api_key=…``); a host
    label does not (``auth.example.com`` is a server). Masking a word by mistake costs a
    message a little detail; showing a key leaks it.
    """
    text = unquote(text)
    if KEY_PREFIX.match(text) or LONG_RUN.search(text):
        return True
    if not host and NAMED_VALUE.search(text):
        return True
    if any(_mixes(run, str.isdigit, str.isalpha) for run in KEY_RUN.findall(text)):
        return True
    if any(_mixes(word, str.isdigit, str.isupper) for word in UPPER_WORD.findall(text)):
        return True
    return any(
        _mixes(run, str.isdigit, str.isupper, str.islower) for run in MIXED_TOKEN.findall(text)
    )


def _mixes(run: str, *kinds: Callable[[str], bool]) -> bool:
    return all(any(kind(c) for c in run) for kind in kinds)


def _shown_path(path: str) -> str:
    """``path`` with each part not a plain word (see the module's docstring) as ``***``."""
    shown: list[str] = []
    after_secret_name = False
    for segment in path.split("/"):
        segment = segment.split(";", 1)[0]  # ";api_key=…": a path part's parameters
        plain = bool(PLAIN_WORD.fullmatch(segment)) and not key_like(segment)
        shown.append(segment if not segment or (plain and not after_secret_name) else MASK)
        after_secret_name = bool(NAMES_SECRET.search(re.sub(r"[^A-Za-z0-9]", "", segment)))
    return "/".join(shown)


def _port_text(netloc: str) -> str:
    host_port = netloc.rpartition("@")[2]
    after_host = host_port.rpartition("]")[2] if host_port.startswith("[") else host_port
    port = after_host.partition(":")[2]
    return port if PORT.fullmatch(port) else ""


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _plain_scheme(scheme: str) -> bool:
    return bool(SCHEME.fullmatch(scheme)) and not key_like(scheme, host=True)


def _scheme_and_host(text: str) -> str:
    """``scheme://host`` of a URL :func:`urlsplit` cannot read, or :data:`UNPARSEABLE`."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    match = AFTER_USER.match(rest)
    host = match["host"].lower() if match else ""
    if not host or not HOST.fullmatch(host) or key_like(host, host=True):
        return UNPARSEABLE
    return f"{scheme}://{host}" if _plain_scheme(scheme) else host
