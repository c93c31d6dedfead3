"""Which recording the calls of a run use: set around each node by ``build_graph``.

A context variable, so the step tasks a node starts and the model calls it makes (on
planexec's background loop or a worker) see the recording of their own graph, and nothing
a client sends can name one.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planexec.recording.recorder import Recording

_ACTIVE: contextvars.ContextVar[Recording | None] = contextvars.ContextVar(
    "planexec_recording", default=None
)


def recording_in_use() -> Recording | None:
    """Return the recording the calls made here record to or replay from (None: live calls)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def using(recording: Recording | None) -> Iterator[None]:
    """Make ``recording`` the one the calls made in this context use (None: live calls).

    None too replaces the recording in use: a graph built without a recording, run from a
    tool of a recorded (or replayed) graph, never records into or replays from that one's.
    """
    token = _ACTIVE.set(recording)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
