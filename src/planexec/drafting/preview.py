"""Plan steps streamed while the model writes them: ``plan_step`` events (``stream_mode="custom"``).

The planner and replanner show a :class:`PlanPreview` each chunk of the reply as it streams
(:func:`planexec.llm.scrubbed.watching`); each step whose text is complete goes out once, as
written, scrubbed of secrets and made storable. Nothing here validates: the whole plan is
validated before anyone approves it or anything runs, and the approval shows the valid plan.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import ijson
from langchain_core.messages import BaseMessage, BaseMessageChunk
from langgraph.config import get_stream_writer

from planexec.llm.replystream import watching
from planexec.redaction.secrets import redact, secret_values
from planexec.storage.storable import UnstorableValueError, clean_text, text_size, to_storable

MAX_PREVIEW_CHARS = 20_000
"""A step whose text is longer is not previewed (the approval still shows it)."""

MAX_PREVIEW_STEPS = 1_000
"""No more steps of one draft are previewed (a plan that long is refused anyway)."""


StepsSeen = Callable[[list[tuple[int, "dict[str, Any] | None"]]], None]
"""Told the steps a chunk of a streaming plan completed: each one's position and step (or None)."""

# ijson's pure-Python backend: linear in the reply however it is chunked, and unlike its C
# backend it reads integers beyond 64 bits (made text later, as state keeps them)
JSON = ijson.get_backend("python")


class PlanPreview:
    """Sends each complete step of one drafting attempt once, as a ``plan_step`` event.

    Each chunk is fed to an incremental JSON parser as it arrives, so the work is linear in
    the reply's length whatever the chunking; a reply that is not plain JSON (Markdown-fenced
    text, a parse error) stops the preview, not the drafting.
    """

    def __init__(self, by: str, draft: int, on_step: StepsSeen | None = None) -> None:
        """Preview the ``draft``-th attempt of the ``by`` role (planner or replanner).

        ``on_step`` is also given the steps each chunk of a streamed reply completes, as
        written (None for one that cannot be: unstorable or too big), with their positions:
        the plan's steps may start as they come (:mod:`planexec.execution.streaming`). A
        whole reply (a model that does not stream) is not offered: its plan is complete.
        """
        self.by, self.draft, self.sent, self.on_step = by, draft, 0, on_step
        self.plan_call: int | None = None  # the index of the Plan tool call's chunks
        self.write: Callable[[Any], None] | None
        try:
            self.write = get_stream_writer()
        except RuntimeError:  # not inside a graph run: nothing to stream to
            self.write = None
        self.secrets = secret_values()
        self.found = ijson.sendable_list()
        self.parser = JSON.items_coro(self.found, "steps.item", use_float=True)

    def __enter__(self) -> PlanPreview:
        """Watch the model's reply (see :func:`planexec.llm.scrubbed.watching`)."""
        self.watch = watching(self)
        self.watch.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop watching; end the parser (a cut-off reply leaves it incomplete: no matter)."""
        self.watch.__exit__(None, None, None)
        with contextlib.suppress(ijson.JSONError, ValueError):
            self.parser.close()

    def plan_text(self, chunk: BaseMessage) -> str:
        """Return the plan text a chunk adds: a piece of the Plan call's arguments, or text."""
        for piece in getattr(chunk, "tool_call_chunks", None) or []:
            if piece.get("name") == "Plan" and self.plan_call is None:
                self.plan_call = piece.get("index")
            if piece.get("index") == self.plan_call and self.plan_call is not None:
                return str(piece.get("args") or "")
        for call in getattr(chunk, "tool_calls", None) or []:  # a whole (not streamed) reply
            if call["name"] == "Plan" and not getattr(chunk, "tool_call_chunks", None):
                return json.dumps(call["args"], default=str)
        return chunk.content if isinstance(chunk.content, str) else ""

    def __call__(self, reply: BaseMessage) -> None:
        """Feed a chunk of the reply to the parser; send the steps it completed.

        The preview never fails a drafting: whatever goes wrong here ends the preview only.
        """
        if self.write is None:
            return
        try:
            self.feed(reply)
        except Exception:  # a preview is a courtesy; the plan is what counts
            self.write = None

    def feed(self, reply: BaseMessage) -> None:
        """Feed one chunk; send each step it completed (at most :data:`MAX_PREVIEW_STEPS`)."""
        added = self.plan_text(reply)
        try:
            if added:  # ijson takes an empty send for the end of the input
                # whole characters (the model layer joins split ones); a lone surrogate the
                # model sent becomes U+FFFD, as the plan's own text does (to_storable)
                self.parser.send(clean_text(added).encode("utf-8"))
        except (ijson.JSONError, ValueError, RecursionError, StopIteration):
            self.write = None  # not a plan in plain JSON: the approval shows what it was
        seen: list[tuple[int, dict[str, Any] | None]] = []
        for step in self.found:
            self.sent += 1
            if self.sent > MAX_PREVIEW_STEPS:
                self.write = None
                break
            shown = self.shown(step)
            if shown is not None and self.write is not None:
                self.write(
                    {
                        "event": "plan_step",
                        "by": self.by,
                        "draft": self.draft,
                        "index": self.sent,
                        "written": shown,
                    }
                )
            seen.append((self.sent, shown))
        del self.found[:]
        streamed = isinstance(reply, BaseMessageChunk)  # a whole reply gains nothing by it
        if seen and streamed and self.on_step is not None and self.write is not None:
            self.on_step(seen)

    def shown(self, step: Any) -> dict[str, Any] | None:
        """Return a step as it may be streamed (scrubbed, storable, bounded), or None."""
        if not isinstance(step, dict):
            return None
        try:
            value = to_storable(step)
        except (UnstorableValueError, TypeError, ValueError, RecursionError):
            return None
        if text_size(value) > MAX_PREVIEW_CHARS:
            return None
        scrubbed: dict[str, Any] = redact(value, self.secrets)
        return scrubbed
