"""What counts as a transient error: the one definition every retry in planexec uses.

A transient error may pass if the same call is made again a little later: a tool's
:class:`~planexec.errors.TransientToolError`, a timeout, a dropped connection, and from an
HTTP client (openai, httpx, requests) a connection failure, a timeout, or the HTTP statuses
the OpenAI client itself treats as retryable (408, 409, 429 and 5xx). Anything else (a bad
request, a refused key, a tool's :class:`~planexec.errors.ToolError`, a bug) fails the same
way every time and is not retried.

Two layers retry, each with this definition and each bounded:

* a model node (planner, evaluator, replanner) by LangGraph's ``RetryPolicy``
  (``planexec.graph.MODEL_RETRY``); the OpenAI client itself does not retry
  (``max_retries=0``), so one model call makes at most ``MODEL_RETRY.max_attempts`` requests;
* a step (a tool call, or a tool-less step's model conversation) by the executor, at most
  ``Context.step_max_attempts`` times.
"""

from __future__ import annotations

import sys

from planexec.errors import TransientToolError

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses below 500 worth trying again (as the OpenAI client's own retry rule)."""


def is_transient(exc: BaseException) -> bool:
    """Say whether ``exc`` may pass if the same call is made again later."""
    if isinstance(exc, TransientToolError | TimeoutError | ConnectionError):
        return True
    # HTTP clients tools and models use; a library that is not imported raised nothing
    openai, httpx, requests = (sys.modules.get(n) for n in ("openai", "httpx", "requests"))
    if openai is not None:
        if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
            return True
        if isinstance(exc, openai.APIStatusError):
            return _retryable_status(exc.status_code)
    if httpx is not None:
        if isinstance(exc, httpx.TransportError):  # connect/read timeouts, dropped connections
            return True
        if isinstance(exc, httpx.HTTPStatusError):
            return _retryable_status(exc.response.status_code)
    if requests is not None:
        if isinstance(exc, requests.ConnectionError | requests.Timeout):
            return True
        if isinstance(exc, requests.HTTPError) and exc.response is not None:
            return _retryable_status(exc.response.status_code)
    return False


def _retryable_status(status: object) -> bool:
    code = status if isinstance(status, int) else 0
    return code in RETRYABLE_STATUS or 500 <= code <= 599
