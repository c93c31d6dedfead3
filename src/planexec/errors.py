"""Exceptions planexec raises, and the one definition of a transient error.

Every planexec error is a ``ValueError``: the LangGraph API server (and so Studio and the SDK)
shows the message of ValueError-family errors and hides every other one behind "An internal
error occurred".

A transient error (:func:`is_transient`) may pass if the same call is made again a little later:
a tool's :class:`TransientToolError`, a timeout, a dropped connection, and from an HTTP client
(openai, httpx, requests) a connection failure, a timeout, or the HTTP statuses the OpenAI client
itself treats as retryable (408, 409, 429 and 5xx). Anything else (a bad request, a refused key,
a tool's :class:`ToolError`, a bug) fails the same way every time and is not retried.

Two layers retry, each with this definition and each bounded:

* a model node (planner, evaluator, replanner) by LangGraph's ``RetryPolicy``
  (``planexec.graph.MODEL_RETRY``); the OpenAI client itself does not retry
  (``max_retries=0``), so one model call makes at most ``MODEL_RETRY.max_attempts`` requests;
* a step (a tool call, or a tool-less step's model conversation) by the executor, at most
  ``Context.step_max_attempts`` times.
"""

from __future__ import annotations

import sys

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses below 500 worth trying again (as the OpenAI client's own retry rule)."""


class PlanexecError(ValueError):
    """Base class for errors planexec reports to its users."""


class ConfigurationError(PlanexecError):
    """A setting is missing or wrong (an API key, a model name, a path)."""


class ToolNameClashError(ConfigurationError):
    """A tool was registered under a name another tool already has (and not to replace it)."""


class ToolError(PlanexecError):
    """A tool refused its input; the message says why. Not retried."""


class TransientToolError(PlanexecError):
    """A tool failed in a way that may pass on its own (network, busy resource). Retried."""


class WorkspaceError(ToolError):
    """A path is outside the run's workspace, or is not a regular file or folder."""


class PlanNotApprovedError(PlanexecError):
    """The plan in state is not the approved one (changed after approval, or never approved).

    The executor records it and sends the plan back to approval; nothing runs.
    """


class ModelCallError(PlanexecError):
    """A model call failed; the message says how, in the provider's words where it gave some.

    ``transient`` says whether the same call may pass if made again: the model layer
    (:mod:`planexec.llm.calls`) has already retried what it could within the call's deadline,
    so only a call cut off after part of its reply was shown to a watcher is transient.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        """Keep the message and whether a new call may pass."""
        super().__init__(message)
        self.transient = transient


class ModelTimeoutError(ModelCallError):
    """A model call passed one of its time limits (connect, idle or total; ``Context``)."""


class ProviderError(ModelCallError):
    """The provider failed the call for good; the message gives its status, code and words.

    A bad request, a spent quota, a refused key, rate limits past the deadline, or a connection
    that failed on every try.
    """


class IncompleteReplyError(ModelCallError):
    """A reply that did not end normally: cut at a token limit, filtered, refused, or cut off.

    ``reason`` says what happened in the provider's words (its finish reason, its refusal).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        """Keep the message and the provider's reason."""
        super().__init__(message)
        self.reason = reason


def is_transient(exc: BaseException) -> bool:
    """Say whether ``exc`` may pass if the same call is made again later."""
    if isinstance(exc, ModelCallError):
        return exc.transient
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
