"""Step records in state: made from step outcomes, keyed by step id, kept while they count.

The one place a :class:`~planexec.state.StepRecord` is made and read back: pending ones for a
new plan, ones carried over an edit, and the record of a step task's
:class:`~planexec.state.StepOutcome` (:func:`to_record`, :func:`records_after`), read back as
an outcome by a later round's dependents (:func:`earlier_outcome`).

``State.steps`` maps :func:`record_key` of a step's id to its :class:`~planexec.state.StepRecord`
(checkpoints are JSON: object keys are strings).
"""

from __future__ import annotations

from graphlib import CycleError

from planexec.plan.doc import step_digest, topological_order
from planexec.state import PlanDoc, StepOutcome, StepRecord


def record_key(step_id: int) -> str:
    """Return the key of step ``step_id``'s record in ``State.steps``."""
    return str(step_id)


def pending_record(*, judged_retry: bool = False) -> StepRecord:
    """Return the record of a step that has not run (again) yet.

    ``judged_retry`` marks a step the evaluator's judge sent back to run again.
    """
    record = StepRecord(status="pending", attempts=0)
    if judged_retry:
        record["judged_retry"] = True
    return record


def current_records(plan: PlanDoc, records: dict[str, StepRecord]) -> dict[str, StepRecord]:
    """Return the step records that still belong to this plan; the others become pending.

    A record counts only if it was made for exactly this step's content and every step it
    depends on counts too (a changed dependency means a changed input).
    """
    current: dict[str, StepRecord] = {}
    valid: set[int] = set()
    try:
        ordered = topological_order(plan["steps"])
    except CycleError:  # an invalid plan edited into state: none of it has run
        return {record_key(s["id"]): pending_record() for s in plan["steps"]}
    for step in ordered:
        rec = records.get(record_key(step["id"]))
        finished = rec is not None and rec.get("status", "pending") != "pending"
        if (
            rec is not None
            and finished
            and rec.get("step_digest") == step_digest(step, plan["goal"])
            and all(d in valid for d in step["depends_on"])
        ):
            valid.add(step["id"])
            current[record_key(step["id"])] = rec
        else:
            current[record_key(step["id"])] = pending_record()
    return current


def records_after_edit(
    plan: PlanDoc, new_plan: PlanDoc, records: dict[str, StepRecord]
) -> dict[str, StepRecord]:
    """Return the records of an edited plan's steps.

    A step keeps an earlier success only if it, and every step it depends on, is unchanged;
    every other step is pending.
    """
    old_steps = {s["id"]: s for s in plan["steps"]}
    kept: set[int] = set()
    after: dict[str, StepRecord] = {}
    for step in topological_order(new_plan["steps"]):
        rec = records.get(record_key(step["id"]))
        if (
            rec is not None
            and rec.get("status") == "succeeded"
            and old_steps.get(step["id"]) == step
            and all(dep in kept for dep in step["depends_on"])
        ):
            kept.add(step["id"])
            after[record_key(step["id"])] = rec
        else:
            after[record_key(step["id"])] = pending_record()
    return {record_key(s["id"]): after[record_key(s["id"])] for s in new_plan["steps"]}


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
    if result.get("replayed"):
        record["replayed"] = True
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
