"""The one retry layer of tool calls: which failed attempts of a step are tried again, and when.

A step's attempt fails with its tool's error (or, for a step without a tool, the error its model
conversation ended with). It is attempted again:

* for a transient error (:func:`planexec.errors.is_transient`, the one classifier), up to
  ``Context.step_max_attempts`` attempts in all;
* for any error, up to ``1 + N`` attempts with the step's ``on_failure: {"retry": N}``;

whichever is more (``max(step_max_attempts, 1 + N)``), after a capped exponential backoff
(:func:`retry_delay`). A timeout planexec imposes
(:class:`~planexec.concurrency.toolcalls.StepTimeout`) is not a transient error of the tool: it is
tried again only for a tool whose metadata says its timed-out calls are safe to repeat
(:data:`planexec.concurrency.toolcalls.RETRY_ON_TIMEOUT`).

A model request inside a step is not attempted again here for its own sake: the model layer
(:mod:`planexec.llm.calls`) already asked it again as often as may help, and what it gives up
on is not transient.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool

from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT, StepTimeout
from planexec.context import Context
from planexec.errors import is_transient
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


def retries_timeouts(tool_: BaseTool | None) -> bool:
    """Say whether a tool declared its timed-out calls safe to retry (metadata, not default)."""
    return tool_ is not None and bool((tool_.metadata or {}).get(RETRY_ON_TIMEOUT, False))


def retry_delay(context: Context, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (exponential, capped)."""
    try:
        delay = context.retry_initial_interval * context.retry_backoff_factor ** (attempt - 1)
    except OverflowError:
        return MAX_RETRY_INTERVAL
    return min(delay, MAX_RETRY_INTERVAL)
