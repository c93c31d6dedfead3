"""Which steps a replay served from a recording: their records and traces say so.

A replayed tool did not run: the files it would have written are not there, the messages it
would have sent were not sent. So a step any of whose tool calls was served from a recording
is marked ``replayed: true`` in its step record, its stand-in tool run carries the metadata
``planexec_replayed: true``, and the run's answer does not claim the files it names
(:mod:`planexec.nodes.finalizer`). The step task starts a :class:`Replayed` mark
(:func:`track_replayed`) and every replayed call of the step adds to it
(:func:`mark_replayed`), wherever it runs in the step's task.
"""

from __future__ import annotations

import contextvars

REPLAYED_METADATA = "planexec_replayed"
"""The metadata key (value ``True``) on the traced stand-in run of a replayed tool call."""


class Replayed:
    """How many tool calls of one step were served from a recording (true if any)."""

    def __init__(self) -> None:
        """Start with none."""
        self.calls = 0

    def __bool__(self) -> bool:
        """Say whether any call of the step was replayed."""
        return self.calls > 0


_STEP: contextvars.ContextVar[Replayed | None] = contextvars.ContextVar(
    "planexec_replayed_step", default=None
)


def track_replayed() -> Replayed:
    """Start the mark of the step run in this context (its own task) and return it."""
    mark = Replayed()
    _STEP.set(mark)  # the step task's own context: gone with the task
    return mark


def mark_replayed() -> None:
    """Count one replayed call for the step this call belongs to (outside a step: nothing)."""
    mark = _STEP.get()
    if mark is not None:
        mark.calls += 1
