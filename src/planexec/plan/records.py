"""Step records in state: keyed by step id, fresh ones pending, kept only while they still count.

``State.steps`` maps :func:`record_key` of a step's id to its :class:`~planexec.state.StepRecord`
(checkpoints are JSON: object keys are strings).
"""

from __future__ import annotations

from graphlib import CycleError

from planexec.plan.doc import step_digest, topological_order
from planexec.state import PlanDoc, StepRecord


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
