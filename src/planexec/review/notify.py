"""The approval hook: tell someone when a question starts waiting, expires, or is answered.

``build_graph(approval_hook=...)`` (else ``$PLANEXEC_APPROVAL_HOOK``, a URL) is a Python
callable given a :class:`HookEvent`, or an ``http(s)`` URL the event is POSTed to as JSON
(5 seconds' timeout). An event holds what identifies the question and the answer, never
plan arguments, feedback or secrets. Each event is sent once: it is a LangGraph task of the
node that asks, so a node replayed on resume does not send it again. A hook that fails is
logged and never fails the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Literal, NotRequired
from urllib.parse import urlsplit

import httpx
from langgraph.func import task
from typing_extensions import TypedDict

from planexec.errors import ConfigurationError
from planexec.state import Identity

log = logging.getLogger(__name__)

HOOK_TIMEOUT = 5.0
"""Seconds a URL hook may take to answer."""
HOOK_TASK = "approval_hook"
"""The name of the LangGraph task that sends an event (seen in ``updates`` streams)."""


class HookEvent(TypedDict):
    """What the hook is told (JSON): which question, and what happened to it."""

    event: Literal["waiting", "expired", "answered"]
    thread_id: str | None
    kind: Literal["plan", "step_failure"]
    version: int
    digest: str
    asked_at: str | None
    expires_at: str | None
    step: NotRequired[int]
    action: NotRequired[str]
    """The answer taken (``answered``): approve, reject, ... or ``refused``."""
    by: NotRequired[Identity]


ApprovalHook = Callable[[HookEvent], object] | str
"""A callable given each event, or a URL each event is POSTed to."""


class Notifier:
    """Sends hook events to one callable or URL, once each, without ever raising."""

    def __init__(self, hook: ApprovalHook) -> None:
        """Keep the hook; its events are sent by a durable task of this notifier."""
        self.hook = hook

        def deliver(event: HookEvent) -> bool:
            return self._deliver(event)

        deliver.__name__ = HOOK_TASK  # a task's id comes from its name
        self._task = task(deliver)

    def send(self, event: HookEvent) -> None:
        """Send ``event`` once (in a node: a task, whose recorded result a replay reuses)."""
        self._task(event).result()

    def _deliver(self, event: HookEvent) -> bool:
        try:
            if isinstance(self.hook, str):
                httpx.post(self.hook, json=dict(event), timeout=HOOK_TIMEOUT).raise_for_status()
            else:
                self.hook(event)
        except Exception as exc:  # a hook never fails the run
            # the error's type only: its text may hold the URL, and so a token in it
            log.warning("approval hook failed on %r event: %s", event["event"], type(exc).__name__)
            return False
        return True


def notifier_from(hook: ApprovalHook | None) -> Notifier | None:
    """Return the notifier of ``build_graph(approval_hook=...)`` or ``$PLANEXEC_APPROVAL_HOOK``."""
    if hook is None:
        hook = os.environ.get("PLANEXEC_APPROVAL_HOOK") or None
        if hook is None:
            return None
    if isinstance(hook, str):
        parts = urlsplit(hook)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"approval_hook (build_graph or PLANEXEC_APPROVAL_HOOK) is a callable or an "
                f"http(s) URL, not {hook!r}"
            )
    elif not callable(hook):
        raise ConfigurationError(
            f"approval_hook (build_graph) is a callable or an http(s) URL, not {hook!r}"
        )
    return Notifier(hook)
