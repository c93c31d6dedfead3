"""Where a failed model request went, fit to show: the endpoint a provider error names.

A bad base URL (``OPENAI_BASE_URL``, ``base_url=``) fails every call the same way ("Connection
error."); the error is only useful if it says which URL the client tried. What is shown is
``scheme://host:port/path`` of the request the client made: its user, password, query and
fragment are left out (a key often rides in ``?api_key=`` or ``user:key@``), a path part that
looks like a key (a run of 16 or more letters and digits mixing both, as ``sk-proj-…`` or a
token in the path) is masked, and any secret value left is scrubbed
(:func:`planexec.guarantees.secrets.scrub_text`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from planexec.guarantees.secrets import MASK, scrub_text

KEY_RUN = re.compile(r"[A-Za-z0-9]{16,}")
"""A run of letters and digits long enough to be a key (when it mixes both)."""


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
    return shown_endpoint(str(url)) if url is not None else None


def shown_endpoint(url: str) -> str | None:
    """Return ``url`` as an endpoint fit to show (see the module's docstring), None if not a URL."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port out of range, a malformed IPv6 host
        return None
    if not parts.scheme or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    where = f"{host}:{port}" if port is not None else host
    path = "/".join(MASK if _key_like(part) else part for part in parts.path.split("/"))
    return scrub_text(f"{parts.scheme}://{where}{path}")


def _key_like(part: str) -> bool:
    return any(
        any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        for run in KEY_RUN.findall(part)
    )
