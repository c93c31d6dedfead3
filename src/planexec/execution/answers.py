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
from collections.abc import AsyncIterator
from typing import Any

from langgraph_sdk import get_client

POLL_SECONDS = 0.2
"""How often a speculating run on the server looks for a queued answer."""

_COMING: set[tuple[str, str | None]] = set()
_LOCK = threading.Lock()


def stop_speculating(thread_id: str, digest: str | None = None) -> None:
    """Say that an answer to the approval of ``thread_id`` is coming: start no new early step.

    ``digest`` (the request's) limits it to that plan's question; None: any question of the
    thread. Steps under way finish and are kept, so the stream ends soon and nothing runs
    twice; then resume the thread with the answer. Call it from any thread.
    """
    with _LOCK:
        _COMING.add((str(thread_id), digest))


def _said(thread_id: str, digest: str) -> bool:
    with _LOCK:
        return (thread_id, digest) in _COMING or (thread_id, None) in _COMING


def _forget(thread_id: str, digest: str) -> None:
    with _LOCK:
        _COMING.discard((thread_id, digest))
        _COMING.discard((thread_id, None))


class AnswerWatch:
    """Whether an answer to one approval request is coming (see the module)."""

    def __init__(self, thread_id: str | None, digest: str) -> None:
        """Watch the question about the plan of ``digest`` on ``thread_id``."""
        self.thread_id, self.digest = thread_id, digest
        self.queued = False

    def coming(self) -> str | None:
        """Return why no new step should start (an answer is coming), or None."""
        if self.queued:
            return "a run is waiting on the thread (the approval was answered)"
        if self.thread_id is not None and _said(self.thread_id, self.digest):
            return "the approval was answered"
        return None

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
