"""Evaluator node: check results against what steps were meant to produce, then decide.

Every newly succeeded step gets the cheap checks of :mod:`planexec.judging` (output
present,
declared files exist); with ``llm_judge`` the judge also sees them, in one call per round.
Decisions: finish, retry, replan, give_up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any

from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.judging import Judgement, cheap_problem, judge
from planexec.llm import models
from planexec.llm.usage import UsageCounter
from planexec.plan.doc import plan_of, topological_order
from planexec.plan.records import current_records, pending_record, record_key
from planexec.spending.budget import (
    Budget,
    BudgetExhausted,
    describe_stop,
    run_budget,
    spending,
)
from planexec.state import Evaluation, PlanDoc, State, StepDoc, StepRecord
from planexec.storage.outputs import OutputFileError, output_of
from planexec.storage.storable import storable_text
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox


def downstream(steps: list[StepDoc], roots: set[int]) -> set[int]:
    """Return the steps that depend on any of ``roots``, directly or not (roots excluded)."""
    found: set[int] = set()
    for step in topological_order(steps):
        if any(d in roots or d in found for d in step["depends_on"]):
            found.add(step["id"])
    return found - roots


@dataclass
class Checked:
    """The records after the cheap checks, and the outputs that passed them (for the judge)."""

    plan: PlanDoc
    records: dict[str, StepRecord]
    passed: dict[int, Any]


def check_results(state: State, ctx: Context, *, sandbox: Sandbox, tools: ToolRegistry) -> Checked:
    """Run the cheap checks on every newly succeeded step (reads its output and files)."""
    workspace = sandbox.for_run(ctx)
    store = sandbox.output_store()
    plan = plan_of(state)
    tool_of = {s["id"]: s["tool"] for s in plan["steps"]}
    current = current_records(plan, state.get("steps") or {})  # only this plan's results count
    records: dict[str, StepRecord] = {k: StepRecord(**v) for k, v in current.items()}
    passed: dict[int, Any] = {}
    for sid in [int(k) for k, r in records.items() if r.get("status") == "succeeded"]:
        rec = records[record_key(sid)]
        if rec.get("checked"):
            continue
        rec["checked"] = True
        try:
            output = output_of(rec, store)
        except OutputFileError as exc:
            problem: str | None = str(exc)
        else:
            problem = cheap_problem(output, tools.file_fields(tool_of.get(sid)), workspace)
        if problem:
            rec["status"], rec["error"] = "failed", f"check failed: {problem}"
        else:
            passed[sid] = output
    return Checked(plan, records, passed)


async def evaluate(
    state: State, *, sandbox: Sandbox, tools: ToolRegistry, chat_models: models.ChatModels
) -> dict[str, Any]:
    """Check the latest round's results and choose what happens next (every run)."""
    ctx = context_of(get_runtime(Context).context)
    budget = run_budget(state, ctx)
    found = await asyncio.to_thread(  # reads outputs and files
        partial(check_results, sandbox=sandbox, tools=tools), state, ctx
    )
    if not (ctx.llm_judge and found.passed) or budget.stop():
        return ending_if_spent(budget, decide(state, ctx, found, None))
    counter = UsageCounter("evaluator")
    model = await asyncio.to_thread(chat_models.for_role, "evaluator", ctx)
    config = counter.config(models.internal_call("judge model"))
    try:
        with spending(budget):
            judgement: Judgement | None = await judge(
                model, found.plan["steps"], found.passed, config
            )
    except BudgetExhausted:
        judgement = None
    return {
        **ending_if_spent(budget, decide(state, ctx, found, judgement)),
        "usage": counter.usage(),
    }


def ending_if_spent(budget: Budget, decided: dict[str, Any]) -> dict[str, Any]:
    """End the run instead of retrying or replanning once a budget is spent (naming it)."""
    decided["busy_seconds"] = budget.elapsed()
    stop = budget.stop()
    evaluation = decided.get("evaluation")
    if stop is None or evaluation is None or evaluation["decision"] == "finish":
        return decided
    decided["evaluation"] = Evaluation(decision="give_up", reason=describe_stop(stop), retry=[])
    decided["budget_stop"] = stop
    return decided


def decide(
    state: State, ctx: Context, found: Checked, judgement: Judgement | None
) -> dict[str, Any]:
    """Apply the judge's verdicts, then decide: finish, retry, replan or give up.

    A judge's rejection gets one re-run per plan revision: the rejected steps and every step
    built on them run again (marked ``judged_retry``), and a rejection after that is final.
    A step whose result was built on a step that failed a check afterwards is discarded
    (``skipped``), so a revision never keeps a step without the steps it depends on.
    """
    plan, records = found.plan, found.records
    retry: list[int] = []
    for sid, verdict in (judgement.verdicts if judgement else {}).items():
        rec = records[record_key(sid)]
        if not verdict.ok:
            rec["status"] = "failed"
            rec["error"] = "judge: " + storable_text(verdict.reason or "does not fit", 500)
            if not rec.get("judged_retry"):
                retry.append(sid)
    note = judgement.note if judgement else ""

    # on_failure: "skip" (or a reviewer's skip), and the steps skipped after them
    tolerated = _tolerated(plan["steps"], records, set(state.get("reviewer_skipped") or []))
    failed = sorted(
        int(s)
        for s, r in records.items()
        if r.get("status") == "failed" and int(s) not in tolerated
    )
    skipped = sorted(
        int(s)
        for s, r in records.items()
        if r.get("status") == "skipped" and int(s) not in tolerated
    )
    unrun = sorted(int(s) for s, r in records.items() if r.get("status") == "pending")
    built_on_retry = downstream(plan["steps"], set(retry))
    if unrun:  # only a state edit or fork leaves steps unrun: the executor's gate decides
        evaluation = Evaluation(
            decision="retry", reason=f"steps {unrun} of this plan have not run", retry=unrun
        )
    elif not failed and not skipped:
        reason = "every step succeeded"
        if tolerated:
            reason = (
                f"steps {sorted(tolerated)} failed or were skipped; the plan goes on without "
                "them (on_failure: skip)"
            )
        evaluation = Evaluation(decision="finish", reason=reason, retry=[])
    elif retry and set(retry) == set(failed) and set(skipped) <= built_on_retry:
        for sid in sorted(set(retry) | built_on_retry):
            records[record_key(sid)] = pending_record(judged_retry=True)
        evaluation = Evaluation(
            decision="retry", reason=f"the judge rejected steps {retry}", retry=retry
        )
    elif (asked := _to_ask(plan["steps"], failed, state)) is not None:
        evaluation = Evaluation(
            decision="ask", reason=f"step {asked} failed; its plan asks a human", retry=[asked]
        )
    else:
        _discard_built_on(plan["steps"], records, failed)
        if state.get("replans", 0) < ctx.max_replans:
            evaluation = Evaluation(decision="replan", reason=f"steps {failed} failed", retry=[])
        else:
            evaluation = Evaluation(
                decision="give_up",
                reason=f"steps {failed} failed and the replan limit ({ctx.max_replans}) is reached",
                retry=[],
            )
    if note:
        evaluation["reason"] += f" ({note})"
    return {"steps": records, "evaluation": evaluation}


MAX_ASKS_PER_STEP = 3
"""Times one step's failure is put to a human; after that its failure is replanned around."""


def _to_ask(steps: list[StepDoc], failed: list[int], state: State) -> int | None:
    """Return the first failed step whose plan says ``on_failure: "ask"`` (asks left)."""
    asks = state.get("failure_asks") or {}
    policy = {s["id"]: s.get("on_failure") for s in steps}
    for sid in failed:
        if policy.get(sid) == "ask" and asks.get(record_key(sid), 0) < MAX_ASKS_PER_STEP:
            return sid
    return None


def _tolerated(
    steps: list[StepDoc], records: dict[str, StepRecord], skipped_by_reviewer: set[int]
) -> set[int]:
    """Return the failed steps to go on without, and the steps skipped after them.

    Those are the steps whose plan says ``on_failure: "skip"`` and those a reviewer skipped.
    """
    status = {s["id"]: records.get(record_key(s["id"]), {}).get("status") for s in steps}
    gave_up = {
        s["id"]
        for s in steps
        if (s.get("on_failure") == "skip" or s["id"] in skipped_by_reviewer)
        and status[s["id"]] == "failed"
    }
    after = downstream(steps, gave_up)
    return gave_up | {sid for sid in after if status[sid] == "skipped"}


def _discard_built_on(
    steps: list[StepDoc], records: dict[str, StepRecord], failed: list[int]
) -> None:
    """Mark succeeded steps built on a failed step's output as skipped, naming the cause."""
    for step in topological_order(steps):
        rec = records.get(record_key(step["id"]))
        if rec is None or rec.get("status") != "succeeded":
            continue
        bad = [
            d
            for d in step["depends_on"]
            if records.get(str(d), {}).get("status") in ("failed", "skipped")
        ]
        if bad:
            rec["status"] = "skipped"
            rec["error"] = (
                f"discarded: it depends on step {bad[0]}, which failed after this step ran"
            )
