"""Streaming a model's reply to a watcher while the caller still gets it whole.

Inside :func:`watching`, :class:`planexec.llm.scrubbed.ScrubbedChatModel` streams the model it wraps
(:func:`planexec.llm.calls.call`) and shows the watcher each raw chunk, mended (whole
characters); callbacks, traces and ``messages`` streams still see only the whole scrubbed
reply. The plan preview is the watcher (:mod:`planexec.drafting.preview`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from langchain_core.messages import BaseMessage

PartialReply = Callable[[BaseMessage], None]
"""Called with each streamed chunk of a reply as it arrives (raw: not scrubbed)."""

_watcher: ContextVar[PartialReply | None] = ContextVar("planexec_reply_watcher", default=None)


@contextmanager
def watching(listener: PartialReply) -> Iterator[None]:
    """While inside, scrubbed models stream their wrapped model and show ``listener`` the reply.

    The listener gets each raw chunk as it arrives: it must scrub what it passes on.
    Callbacks, traces and ``messages`` streams still see only the whole scrubbed reply.
    """
    token = _watcher.set(listener)
    try:
        yield
    finally:
        _watcher.reset(token)


def current_watcher() -> PartialReply | None:
    """Return the watcher of the enclosing :func:`watching`, if any."""
    return _watcher.get()
