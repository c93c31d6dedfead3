"""What a step task returns (:class:`StepOutcome`), and how it becomes the step's record.

A task's result is kept in the checkpoint, so an outcome is JSON with every secret removed; the
executor node turns a round's outcomes into step records (:func:`records_after`) and sums the
LLM usage they counted (:func:`round_usage`).
"""

from __future__ import annotations

import time
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from planexec.guarantees.secrets import redact
from planexec.guarantees.storable import storable_text
from planexec.plan.doc import step_digest
from planexec.plan.records import current_records, record_key
from planexec.state import (
    OutputFile,
    PlanDoc,
    RefusedCall,
    RoleUsage,
    StepDoc,
    StepRecord,
    add_usage,
)

Finished = Literal["succeeded", "failed", "skipped"]  # a StepStatus other than "pending"


class StepOutcome(TypedDict):
    """How one step ended in this round: the result of its durable task."""

    id: int
    status: Finished
    attempts: int
    started_at: float | None
    ended_at: float | None
    output: Any
    summary: str
    error: str | None
    usage: dict[str, RoleUsage]
    output_file: NotRequired[OutputFile]
    """Only for a spilled output (see :mod:`planexec.storage.outputs`); ``output`` is then None."""
    refused_calls: NotRequired[list[RefusedCall]]
    ran: NotRequired[str]
    """Digest of the step that ran (:func:`ran_digest`): a replayed result counts only for it."""


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
) -> StepOutcome:
    """Build a step's outcome, secrets removed.

    ``output`` must already be storable (:func:`planexec.guarantees.storable.to_storable`); the
    summary
    and the error, which quote tools and models, are made storable here.
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
    return result


def earlier_outcome(step_id: int, record: StepRecord) -> StepOutcome | None:
    """Return a step that finished in an earlier round as its dependents see it (else None)."""
    status = record.get("status")
    if status != "succeeded" and status != "failed" and status != "skipped":
        return None
    result = StepOutcome(
        id=step_id,
        status=status,
        attempts=record.get("attempts", 0),
        started_at=record.get("started_at"),
        ended_at=record.get("ended_at"),
        output=record.get("output"),
        summary=record.get("summary", ""),
        error=record.get("error"),
        usage={},  # counted in its own round
    )
    if "output_file" in record:
        result["output_file"] = record["output_file"]
    return result


def to_record(result: StepOutcome, digest: str, *, judged_retry: bool) -> StepRecord:
    """Return the record of a step's outcome, for the step content whose digest is given."""
    record = StepRecord(
        step_digest=digest,
        status=result["status"],
        attempts=result["attempts"],
        started_at=result["started_at"],
        ended_at=result["ended_at"],
        summary=result["summary"],
        output=result["output"],
        error=result["error"],
    )
    if result.get("output_file") is not None:
        record["output_file"] = result["output_file"]
    if result.get("refused_calls"):
        record["refused_calls"] = result["refused_calls"]
    if judged_retry:
        record["judged_retry"] = True
    return record


def records_after(
    plan: PlanDoc, before: dict[str, StepRecord], outcomes: list[StepOutcome]
) -> dict[str, StepRecord]:
    """Return the plan's step records once a round's ``outcomes`` are in.

    ``before`` are the records as the evaluator left them: its mark on a judged retry carries
    over (its bound on judge retries lives there).
    """
    steps = {s["id"]: s for s in plan["steps"]}
    records = current_records(plan, before)
    for result in outcomes:
        key = record_key(result["id"])
        digest = step_digest(steps[result["id"]], plan["goal"])
        judged = bool(before.get(key, {}).get("judged_retry"))
        records[key] = to_record(result, digest, judged_retry=judged)
    return records


def round_usage(outcomes: list[StepOutcome]) -> dict[str, RoleUsage]:
    """Return the LLM usage a round's steps counted (their executor model calls)."""
    usage: dict[str, RoleUsage] = {}
    for result in outcomes:
        usage = add_usage(usage, result.get("usage"))
    return usage
