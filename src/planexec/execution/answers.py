"""Whether an answer to a plan's approval is on its way: speculation then starts no new step.

The speculator runs beside the approval's question, in the run that asked it, so an answer is
taken only once that run ends. To end it soon without cancelling a step under way (which would
then run again), its round starts no new step once an answer is known to be coming
(:meth:`AnswerWatch.coming`); the steps under way finish and are kept. Two ways to know:

- **in this process**: whoever holds the answer says so with :func:`stop_speculating` before it
  waits for the stream to end (the runs driver and the ``planexec`` command do);
- **on the LangGraph server**: a run queued on the thread (the answer, sent with the default
  ``multitask_strategy``, ``enqueue``) is seen by polling the server's own API
  (``langgraph_sdk.get_client()`` with no URL reaches the server it runs in).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from langgraph_sdk import get_client

POLL_SECONDS = 0.2
"""How often a speculating run on the server looks for a queued answer."""

KEPT_SECONDS = 3600.0
"""How long what :func:`stop_speculating` said is kept if no speculation reads it."""

_COMING: dict[tuple[str, str | None], float] = {}
"""(thread id, request digest or None) -> when an answer was said to be coming (epoch s)."""
_LOCK = threading.Lock()


def stop_speculating(thread_id: str, digest: str | None = None) -> None:
    """Say that an answer to the approval of ``thread_id`` is coming: start no new early step.

    It holds for the question the thread waits on now (one asked before this call): a call
    made while nothing is asked, or a late one after the question was answered, stops nothing
    later. ``digest`` (the request's) limits it to that plan's question; None: the thread's
    question. Steps under way finish and are kept, so the stream ends soon and nothing runs
    twice; then resume the thread with the answer. Call it from any thread.
    """
    now = time.time()
    with _LOCK:
        for said, at in list(_COMING.items()):
            if now - at > KEPT_SECONDS:
                del _COMING[said]
        _COMING[(str(thread_id), digest)] = now


def _said_since(thread_id: str, digest: str, since: float) -> bool:
    with _LOCK:
        times = [_COMING.get((thread_id, digest)), _COMING.get((thread_id, None))]
    return any(at is not None and at >= since for at in times)


def _forget(thread_id: str, digest: str) -> None:
    with _LOCK:
        _COMING.pop((thread_id, digest), None)
        _COMING.pop((thread_id, None), None)


class AnswerWatch:
    """Whether an answer to one approval request is coming (see the module)."""

    def __init__(self, thread_id: str | None, digest: str, asked_at: float) -> None:
        """Watch the question about the plan of ``digest`` on ``thread_id``, asked then."""
        self.thread_id, self.digest, self.asked_at = thread_id, digest, asked_at
        self.queued = False
        self.stopped = False
        """Whether a step was kept from starting because an answer was coming."""

    def coming(self) -> str | None:
        """Return why no new step should start (an answer is coming), or None."""
        why = None
        if self.queued:
            why = "a run is waiting on the thread (the approval was answered)"
        elif self.thread_id is not None and _said_since(self.thread_id, self.digest, self.asked_at):
            why = "the approval was answered"
        self.stopped = self.stopped or why is not None
        return why

    @contextlib.asynccontextmanager
    async def watching(self, on_server: bool) -> AsyncIterator[None]:
        """While the speculation's steps run: on the server, poll for a run queued on the thread.

        On leaving, what :func:`stop_speculating` said of this question is forgotten.
        """
        poll = None
        if on_server and self.thread_id is not None:
            poll = asyncio.create_task(self._poll(self.thread_id))
        try:
            yield
        finally:
            if poll is not None:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await poll
            if self.thread_id is not None:
                _forget(self.thread_id, self.digest)

    async def _poll(self, thread_id: str) -> None:
        client: Any = get_client()
        while not self.queued:
            with contextlib.suppress(Exception):  # a server without the API: never stops early
                pending = await client.runs.list(thread_id, status="pending", limit=1)
                self.queued = bool(pending)
            await asyncio.sleep(POLL_SECONDS)
