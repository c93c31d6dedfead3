"""Exceptions planexec raises, and the one definition of a transient error.

Every planexec error is a ``ValueError``: the LangGraph API server (and so Studio and the SDK)
shows the message of ValueError-family errors and hides every other one behind "An internal
error occurred".

A transient error (:func:`is_transient`) may pass if the same call is made again a little later:
a tool's :class:`TransientToolError`, a timeout, a dropped connection, and from an HTTP client
(openai, anthropic, httpx, requests and alike) a connection failure, a timeout, an HTTP status
worth asking again (:data:`RETRYABLE_STATUS` and 5xx, as the OpenAI client's own rule), or an
error sent inside a 200 reply whose words say it may pass (:data:`TRANSIENT_WORDS`). An error
whose provider code says no retry can pass (:data:`CANNOT_PASS`: a spent quota, a prompt past
the context length, a refused key) is not transient, whatever its status. Anything else (a bad
request, a tool's :class:`ToolError`, a bug) fails the same way every time.

One layer asks each kind of call again, with this definition, bounded:

* a **model request** that failed before any of its reply came, by the model layer
  (:mod:`planexec.llm.calls`): at most ``MAX_TRIES`` (3) requests a call, after the provider's
  ``Retry-After`` (or a short backoff), never past the call's deadline. The provider's client
  itself does not retry (``max_retries=0``), and the error that leaves the model layer is never
  transient, so no node or step asks the same request again. A reply that broke off after part
  of it was shown (:func:`broke_off`) is not asked again by the model layer: whoever watched it
  may start a new conversation (the planner and replanner draft anew, at most twice more:
  ``planexec.graph.MODEL_RETRY``, or ``planexec.execution.streaming.REDRAFTS`` once steps of
  the streaming plan have started);
* a **tool call** by its step (:mod:`planexec.execution.retries`): at most
  ``Context.step_max_attempts`` attempts for a transient error, or ``1 + N`` for any error with
  the step's ``on_failure: {"retry": N}``, whichever is more.
"""

from __future__ import annotations

import re
import sys
from typing import Any

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses below 500 worth trying again (as the OpenAI client's own retry rule)."""

CANNOT_PASS = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "context_length_exceeded",
        "string_above_max_length",
        "invalid_api_key",
        "model_not_found",
        "content_policy_violation",
    }
)
"""Provider error codes (or types) that no retry can pass, whatever their HTTP status."""

TRANSIENT_WORDS = re.compile(
    r"(?<![a-z])(rate[ _-]?limit|too[ _]many[ _]requests|overload|"
    r"server[ _](had[ _]an[ _])?error|internal[ _]error|time[ds]?[ _-]?out|unavailable|"
    r"try[ _]again)",
    re.IGNORECASE,
)
"""What, in an error sent inside a 200 reply (no status to go by), says it may pass if asked
again: its code, type or message (``rate_limit_exceeded``, "Rate limit reached",
``server_error``, "The server had an error", "Server overloaded", "Request timed out"); not a
word inside another ("generate", "first-rate") nor "server" alone ("model not found on this
server")."""


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

    ``transient`` says whether a new call may pass: the model layer (:mod:`planexec.llm.calls`)
    has already asked again what it could within the call's deadline, so only a reply that
    broke off after part of it was shown to a watcher is transient (:func:`broke_off`).
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
    """Say whether ``exc`` may pass if the same call is made again later (see the module).

    The one classifier: the model layer (:mod:`planexec.llm.calls`) asks it whether to send a
    failed request again, the step (:mod:`planexec.execution.retries`) whether to attempt a
    failed tool call again.
    """
    if isinstance(exc, ModelCallError):
        return exc.transient
    if isinstance(exc, TransientToolError | TimeoutError | ConnectionError):
        return True
    fields = _error_fields(exc)
    if {str(fields.get("code")), str(fields.get("type"))} & CANNOT_PASS:
        return False
    status = _status_of(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or 500 <= status <= 599
    if is_connection_failure(exc):
        return True
    if _named(exc, "APIError"):  # an error sent inside a 200 reply: its words tell
        body = getattr(exc, "body", None)
        if isinstance(body, dict):  # an error event in a stream: its code or type, if it has
            named = " ".join(str(fields[k]) for k in ("code", "type") if fields.get(k))
            words = named or str(fields.get("message") or "")  # one, decides; else its words
        else:  # {"error": "some text"}
            words = str(body or exc)
        return TRANSIENT_WORDS.search(words[:1000]) is not None
    return False


def broke_off(exc: BaseException) -> bool:
    """Say whether a model call failed after part of its reply was shown, and may pass.

    The model layer does not ask such a request again (its watcher has seen part of the
    reply): whoever watched may start a new conversation.
    """
    return isinstance(exc, ModelCallError) and exc.transient


def _status_of(exc: BaseException) -> int | None:
    """Return the HTTP status of an HTTP client's error that carries its response, if any."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _error_fields(exc: BaseException) -> dict[str, Any]:
    """Return the fields of a provider's error body (``{"error": {...}}`` or ``{...}``)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    return body if isinstance(body, dict) else {}


def _named(exc: BaseException, *names: str) -> bool:
    return any(kind.__name__ in names for kind in type(exc).__mro__)


def is_connection_failure(exc: BaseException) -> bool:
    """Say whether an HTTP client failed to connect, lost its connection or timed out.

    openai's and anthropic's errors (and LangChain's subclasses of them), httpx's, requests'.
    A library that is not imported raised nothing.
    """
    if _named(exc, "APIConnectionError", "APITimeoutError"):
        return True
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is not None and isinstance(exc, module.TransportError):
            return True
    requests = sys.modules.get("requests")
    return requests is not None and isinstance(exc, requests.ConnectionError | requests.Timeout)
