"""Which failed attempts of a step are tried again, and after how long.

A transient error (:func:`planexec.errors.is_transient`) is retried, up to
``Context.step_max_attempts`` attempts, after a capped exponential backoff. A timeout planexec
imposes is not a transient error of the tool: it is retried only for a tool whose metadata
says its timed-out calls are safe to retry (:data:`planexec.runtime.toolcalls.RETRY_ON_TIMEOUT`).
"""

from __future__ import annotations

from planexec.context import Context
from planexec.errors import is_transient
from planexec.runtime.toolcalls import StepTimeout, retries_timeouts
from planexec.state import StepDoc
from planexec.tools.registry import ToolRegistry

MAX_RETRY_INTERVAL = 60.0
"""Longest wait, in seconds, before a step's next attempt, however the backoff is set."""


def extra_attempts(step: StepDoc) -> int:
    """Return the attempts ``on_failure: {"retry": N}`` adds to a step (0 without it)."""
    policy = step.get("on_failure")
    return int(policy.get("retry", 0)) if isinstance(policy, dict) else 0


def retryable(exc: Exception, step: StepDoc, tools: ToolRegistry) -> bool:
    """Say whether a failed attempt of ``step`` failed transiently (it may be tried again).

    Other errors are tried again only as often as the step's ``on_failure: {"retry": N}``
    says (:func:`extra_attempts`).
    """
    if isinstance(exc, StepTimeout):  # a local timeout is retried only if the tool says so
        return step["tool"] is not None and retries_timeouts(tools.get(step["tool"]))
    return is_transient(exc)


def retry_delay(context: Context, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (exponential, capped)."""
    try:
        delay = context.retry_initial_interval * context.retry_backoff_factor ** (attempt - 1)
    except OverflowError:
        return MAX_RETRY_INTERVAL
    return min(delay, MAX_RETRY_INTERVAL)
