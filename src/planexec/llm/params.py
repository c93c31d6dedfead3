"""A model's settings fit for a trace or a recording: credentials redacted, URLs shown safely.

:func:`shown_params` is what a traced model run shows of the wrapped model's settings
(:mod:`planexec.llm.scrubbed`) and what a recording knows a model by
(:func:`planexec.llm.calls.model_identity`).
"""

from __future__ import annotations

import re
from typing import Any

from planexec.llm.endpoint import shown_url
from planexec.redaction.secrets import REDACTED, redact

CREDENTIAL_NAME = re.compile(
    r"key|token|secret|password|passwd|credential|auth|header|cookie|dsn|signature|jwt|bearer"
    r"|cert|private|(^|[_.-])(pass|pwd|sig|sas|session)($|[_.-])",
    re.IGNORECASE,
)
"""A setting whose name says it may hold a credential: its value is never shown."""
CREDENTIAL_VALUE = re.compile(
    r"^\s*(bearer|basic|digest)\s+\S|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
    re.IGNORECASE,
)
"""A value shaped like a credential, whatever its setting is named: an ``Authorization``
header's value (``Bearer …``, ``Basic …``) or a JSON Web Token (``eyJ….….…``)."""
COUNT_NAME = re.compile(r"tokens$|_tokens_|token_(count|limit)s?$", re.IGNORECASE)
"""A setting named as a count of tokens (``max_tokens``): a number, shown."""
SCHEMAS = frozenset({"tools", "functions", "response_format"})
"""Settings that hold JSON schemas: their property names name arguments, not credentials."""


def shown_params(params: dict[str, Any]) -> dict[str, Any]:
    """Return a model's invocation or identifying parameters fit for a trace.

    A setting named as a credential (``api_key``, a ``*_token``, ``default_headers``, ``sig``,
    ``jwt``, ``bearer``, ``*cert*``, ``private_key``...; not a count such as ``max_tokens``)
    or whose value is shaped like one (``Bearer …``, ``Basic …``, a JSON Web Token) shows
    as ``[redacted]``, at any depth of the settings (``extra_body``, ``model_kwargs``) but not
    inside the schemas of :data:`SCHEMAS` (bound tools, a response format); a URL shows without
    its user, password and query (:func:`planexec.llm.endpoint.shown_url`); every known secret
    is scrubbed from what is left (:func:`planexec.redaction.secrets.redact`).
    """
    shown = {key: value if key in SCHEMAS else _shown(key, value) for key, value in params.items()}
    result: dict[str, Any] = redact(shown)
    return result


def _shown(key: object, value: Any) -> Any:
    name = str(key)
    if CREDENTIAL_NAME.search(name) and not COUNT_NAME.search(name) and value is not None:
        return value if isinstance(value, bool | int | float) else REDACTED
    if isinstance(value, dict):
        return {k: _shown(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(name, v) for v in value]
    if isinstance(value, str) and CREDENTIAL_VALUE.search(value):
        return REDACTED
    if isinstance(value, str) and "://" in value:
        return shown_url(value)
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    return f"<{type(value).__name__}>"  # a client, a callable: nothing a trace can re-run
