"""What a step task returns: a :class:`~planexec.state.StepOutcome`, made by :func:`outcome`.

A task's result is kept in the checkpoint, so an outcome is JSON with every secret removed; the
executor node turns a round's outcomes into step records
(:func:`planexec.plan.records.records_after`) and sums the LLM usage they counted
(:func:`round_usage`).
"""

from __future__ import annotations

import time
from typing import Any

from planexec.plan.doc import step_digest
from planexec.recording.replayed import Replayed
from planexec.redaction.secrets import redact
from planexec.state import (
    Finished,
    OutputFile,
    RefusedCall,
    RoleUsage,
    StepDoc,
    StepOutcome,
    add_usage,
)
from planexec.storage.storable import storable_text


def ran_digest(step: StepDoc) -> str:
    """Return the digest of a step's own content (its tool, arguments, dependencies...).

    A task's id comes from the order of calls, not from its step: a result replayed for a call
    counts only if the step it ran is this one (a plan streamed again after a crash may differ).
    Its first 64 bits: enough to tell two steps apart, and small in every task's checkpoint.

    Remembered per step object (the round's step docs, never changed in place): a step's task,
    its replay check and a streaming round ask for it up to five times a step.
    """
    known = _RAN.get(id(step))
    if known is not None and known[0] is step:  # the same object, alive: its id is not reused
        return known[1]
    digest = step_digest(step, goal="")[:16]
    if len(_RAN) >= _RAN_KEPT:
        _RAN.clear()  # a few rounds' steps; dropping them only costs digests made again
    _RAN[id(step)] = (step, digest)
    return digest


_RAN: dict[int, tuple[StepDoc, str]] = {}
"""``id(step)`` -> (the step, its :func:`ran_digest`); holding the step keeps its id unique."""

_RAN_KEPT = 4096


def now() -> float:
    """Return the wall-clock time, in seconds since the epoch."""
    return time.time()


def outcome(
    step_id: int,
    status: Finished,
    *,
    attempts: int = 0,
    started_at: float | None = None,
    output: Any = None,
    output_file: OutputFile | None = None,
    summary: str = "",
    error: str | None = None,
    usage: dict[str, RoleUsage] | None = None,
    secrets: list[str] | None = None,
    refused_calls: list[RefusedCall] | None = None,
    replayed: Replayed | bool = False,
) -> StepOutcome:
    """Build a step's outcome, secrets removed.

    ``output`` must already be storable (:func:`planexec.storage.storable.to_storable`); the
    summary and the error, which quote tools and models, are made storable here.
    ``replayed`` (read when the outcome is made): a tool call of the step was served from a
    recording (:mod:`planexec.recording.replayed`).
    """
    result = StepOutcome(
        id=step_id,
        status=status,
        attempts=attempts,
        started_at=started_at,
        ended_at=now() if status != "skipped" else None,
        output=output,
        summary=storable_text(redact(summary, secrets)),
        error=None if error is None else storable_text(redact(error, secrets)),
        usage=usage or {},
    )
    if output_file is not None:
        result["output_file"] = output_file
    if refused_calls:
        result["refused_calls"] = redact(refused_calls, secrets)
    if replayed:  # a call of it was served from a recording: its tool did not run
        result["replayed"] = True
    return result


def round_usage(outcomes: list[StepOutcome]) -> dict[str, RoleUsage]:
    """Return the LLM usage a round's steps counted (their executor model calls)."""
    usage: dict[str, RoleUsage] = {}
    for result in outcomes:
        usage = add_usage(usage, result.get("usage"))
    return usage
