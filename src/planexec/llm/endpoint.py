"""A URL fit to show in a message: the endpoint a provider error names, a refused base URL.

A bad base URL (``OPENAI_BASE_URL``, ``base_url=``) fails every call the same way ("Connection
error."); the error is only useful if it says which URL the client tried. :func:`shown_url` is
the one place that writes a URL into a message: ``scheme://host:port/path`` and nothing else.
A key rides in a URL in many ways, so it leaves out the user name and password
(``user:key@``, ``key@``), the query (``?api_key=``), the fragment (``#auth=``) and the
``;params`` of each path part; it masks (``***``) a host label or path part that looks like a
key (see :func:`key_like`), and scrubs any secret value left
(:func:`planexec.guarantees.secrets.scrub_text`). A URL it cannot read shows as its scheme and
host, or as ``(a URL that cannot be parsed)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from planexec.guarantees.secrets import MASK, SECRET_NAME, scrub_text

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
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
"""A URL inside a message (an HTTP client's "… for url 'https://…'")."""
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
    path = "/".join(_shown_segment(segment) for segment in parts.path.split("/"))
    head = f"{scheme}://" if has_scheme and scheme else ""
    return scrub_text(f"{head}{_bracketed(where)}{f':{port}' if port else ''}{path}")


def urls_shown(text: str) -> str:
    """Return ``text`` (an error's words) with each URL in it as :func:`shown_url` shows it."""
    return URL_IN_TEXT.sub(_shown_match, text)


def _shown_match(match: re.Match[str]) -> str:
    url = match.group()
    trail = len(url) - len(url.rstrip(".,;:!?)]}"))  # the sentence's, not the URL's
    return shown_url(url[: len(url) - trail]) + url[len(url) - trail :]


def shown_endpoint(url: str) -> str:
    """Return ``url`` fit to show in a message (an alias of :func:`shown_url`)."""
    return shown_url(url)


def key_like(text: str, *, host: bool = False) -> bool:
    """Return whether ``text`` (a path part; a host label if ``host``) looks like a key.

    It does when it starts like a provider's key (``sk-``, ``gsk_``, ``ghp_``…), holds a run
    of 16+ letters and digits mixing both or of 24+ of either, or a 16+ run joined by ``-`` or
    ``_`` that mixes upper case, lower case and digits. A path part also does when a word that
    names a secret (the environment's rule, :data:`planexec.guarantees.secrets.SECRET_NAME`:
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
    return any(
        _mixes(run, str.isdigit, str.isupper, str.islower) for run in MIXED_TOKEN.findall(text)
    )


def _mixes(run: str, *kinds: Callable[[str], bool]) -> bool:
    return all(any(kind(c) for c in run) for kind in kinds)


def _shown_segment(segment: str) -> str:
    segment = segment.split(";", 1)[0]  # ";api_key=…": a path part's parameters
    return MASK if segment and key_like(segment) else segment


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
