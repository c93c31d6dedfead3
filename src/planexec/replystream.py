"""Streaming a model's reply to a watcher while the caller still gets it whole.

Inside :func:`watching`, :class:`planexec.scrubbed.ScrubbedChatModel` streams the model it wraps
(:func:`stream_reply`) and shows the watcher each raw chunk; callbacks, traces and ``messages``
streams still see only the whole scrubbed reply. The plan preview is the watcher
(:mod:`planexec.planpreview`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langchain_core.runnables import Runnable

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


# Models whose server answered a streamed request with no chunk, by id (compared by identity:
# an id reused by a new model does not match); planexec's model instances are cached.
_cannot_stream: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def current_watcher() -> PartialReply | None:
    """Return the watcher of the enclosing :func:`watching`, if any."""
    return _watcher.get()


def _joined(chunks: list[BaseMessage]) -> BaseMessage:
    """Join a streamed reply's chunks in one merge (adding them one by one is quadratic)."""
    first, rest = chunks[0], chunks[1:]
    if isinstance(first, BaseMessageChunk) and rest:
        first = first + rest  # a list: merged at once
    if isinstance(first, BaseMessageChunk):
        return message_chunk_to_message(first)
    return first  # a model that cannot stream sends one whole message


def stream_reply(
    inner: Runnable[LanguageModelInput, BaseMessage],
    base: object,
    messages: list[BaseMessage],
    kwargs: dict[str, Any],
    watch: PartialReply,
) -> BaseMessage:
    """Stream ``inner``'s raw reply (no callbacks), showing ``watch`` each chunk.

    A server that cannot stream (a streamed request gives no chunk) is asked once more
    without streaming, and from then on without streaming at all: ``base`` (the model under
    any tool binding, which planexec caches) is remembered as one that cannot.
    """
    chunks: list[BaseMessage] = []
    base = base or inner
    if _cannot_stream.get(id(base)) is not base:
        try:
            for chunk in inner.stream(messages, {"callbacks": []}, **kwargs):
                chunks.append(chunk)
                watch(chunk)
        except ValueError:  # langchain: "No generation chunks were returned"
            if chunks:
                raise
            _cannot_stream[id(base)] = base
    if chunks:
        return _joined(chunks)
    reply = inner.invoke(messages, {"callbacks": []}, **kwargs)
    watch(reply)
    return reply


async def astream_reply(
    inner: Runnable[LanguageModelInput, BaseMessage],
    base: object,
    messages: list[BaseMessage],
    kwargs: dict[str, Any],
    watch: PartialReply,
) -> BaseMessage:
    """Stream the raw reply (async), like :func:`stream_reply`."""
    chunks: list[BaseMessage] = []
    base = base or inner
    if _cannot_stream.get(id(base)) is not base:
        try:
            async for chunk in inner.astream(messages, {"callbacks": []}, **kwargs):
                chunks.append(chunk)
                watch(chunk)
        except ValueError:  # langchain: "No generation chunks were returned"
            if chunks:
                raise
            _cannot_stream[id(base)] = base
    if chunks:
        return _joined(chunks)
    reply = await inner.ainvoke(messages, {"callbacks": []}, **kwargs)
    watch(reply)
    return reply
