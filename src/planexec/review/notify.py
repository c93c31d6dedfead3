"""The approval hook: tell someone when a question starts waiting, expires, or is answered.

``build_graph(approval_hook=...)`` (else ``$PLANEXEC_APPROVAL_HOOK``, a URL) is a Python
callable given a :class:`HookEvent`, or an ``http(s)`` URL the event is POSTed to as JSON.
An event holds what identifies the question and the answer, never plan arguments, feedback or
secrets. Each event is sent once, from a node run a resume does not replay (the run that shows
the question, the run that takes its answer); only a process dying before that run's
checkpoint is written sends it again.

A hook never holds nor fails the run: each call has one total deadline,
:data:`HOOK_TIMEOUT` seconds (it runs in a daemon thread, abandoned after the deadline: "the
approval hook did not answer within 5 s"), and whatever it raises (``SystemExit`` too, only
``KeyboardInterrupt`` goes on) is logged by its type, without the URL. The URL's user name,
password and query never reach a log: httpx's own request log shows URLs as
:func:`planexec.llm.endpoint.shown_url` does (``http://host:port/path``).
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Callable
from typing import Literal, NotRequired
from urllib.parse import urlsplit

import httpx
from typing_extensions import TypedDict

from planexec.errors import ConfigurationError
from planexec.llm.endpoint import shown_url, urls_shown
from planexec.state import Identity

log = logging.getLogger(__name__)

HOOK_TIMEOUT = 5.0
"""Seconds a hook call may take in all (a URL's connection, request and whole answer)."""


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
        """Keep the hook."""
        self.hook = hook

    def send(self, event: HookEvent) -> None:
        """Send ``event``, waiting at most :data:`HOOK_TIMEOUT` seconds; never raise.

        Nodes send each event from a run that a resume does not replay (the run that shows a
        request, the run that takes its answer), so an event is sent once (again only if the
        process dies before that run's checkpoint is written).
        """
        self._deliver(event)

    def _deliver(self, event: HookEvent) -> bool:
        """Call the hook in a daemon thread; wait for it at most :data:`HOOK_TIMEOUT` seconds."""
        deadline = HOOK_TIMEOUT
        failed: list[BaseException | None] = []
        context = contextvars.copy_context()

        def call() -> None:
            try:
                context.run(self._call, event, deadline)
            except BaseException as exc:  # SystemExit too: a hook never ends the run
                failed.append(exc)
            else:
                failed.append(None)

        thread = threading.Thread(target=call, name="planexec-approval-hook", daemon=True)
        thread.start()
        thread.join(deadline)
        if not failed:  # still running: abandoned (a daemon thread ends with the process)
            log.warning("the approval hook did not answer within %g s", deadline)
            return False
        error = failed[0]
        if isinstance(error, KeyboardInterrupt):
            raise error
        if error is not None:
            # the error's type only: its text may hold the URL, and so a token in it
            log.warning(
                "approval hook failed on %r event: %s", event["event"], type(error).__name__
            )
            return False
        return True

    def _call(self, event: HookEvent, deadline: float) -> None:
        if isinstance(self.hook, str):
            httpx.post(self.hook, json=dict(event), timeout=deadline).raise_for_status()
        else:
            self.hook(event)


class _ShownUrls(logging.Filter):
    """Rewrite httpx's log records so that a URL shows no user, password nor query."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "://" in message:
            record.msg, record.args = urls_shown(message), ()
        return True


_SHOWN_URLS = _ShownUrls()


def _hide_urls_in_httpx_logs() -> None:
    """Install the filter on httpx's logger (once): it logs each request's URL at INFO."""
    logger = logging.getLogger("httpx")
    if _SHOWN_URLS not in logger.filters:
        logger.addFilter(_SHOWN_URLS)


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
                f"http(s) URL, not {shown_url(hook)!r}"
            )
        _hide_urls_in_httpx_logs()
    elif not callable(hook):
        raise ConfigurationError(
            f"approval_hook (build_graph) is a callable or an http(s) URL, not {hook!r}"
        )
    return Notifier(hook)
