"""Replanner node: revise the remaining work around failures, keeping what succeeded.

Succeeded steps stay in the plan and are never run again; the planner model writes only
new steps (which may depend on kept ones). A revision that repeats the failed steps, or that
cannot be made valid, ends the run with a partial result instead of looping.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from planexec import models, prompts
from planexec.context import Context, context_of
from planexec.plan import Plan, PlanValidationError, Step, to_doc, validate_plan
from planexec.plandoc import plan_digest, topological_order
from planexec.planning import request_plan
from planexec.records import current_records, pending_record, record_key
from planexec.state import PlanDoc, ProposedPlan, Revision, State, StepDoc, StepRecord
from planexec.tools.registry import ToolRegistry


def _signature(step: StepDoc | dict[str, Any]) -> str:
    """Identify what a step does: its tool call (a model step by its description and tools)."""
    what = (
        [step["tool"], step["args"]]
        if step["tool"]
        else [None, step["args"], step["description"], sorted(step.get("tools") or [])]
    )
    return json.dumps(what, sort_keys=True, default=str)


def keepable(steps: list[StepDoc], records: dict[str, StepRecord]) -> list[StepDoc]:
    """Return the steps a revision keeps: succeeded, and every step they depend on kept too.

    A success built on a step that is not kept is lost with it, so the kept steps never
    depend on a step the revision drops (which would make the merged plan invalid).
    """
    kept: set[int] = set()
    for step in topological_order(steps):
        if records.get(str(step["id"]), {}).get("status") == "succeeded" and all(
            d in kept for d in step["depends_on"]
        ):
            kept.add(step["id"])
    return [s for s in steps if s["id"] in kept]


def _outcome_text(step: StepDoc, records: dict[str, StepRecord], kept: frozenset[int]) -> str:
    record = records.get(str(step["id"]), {})
    status = record.get("status", "pending")
    lost = [d for d in step["depends_on"] if d not in kept]
    if status == "succeeded" and lost:  # not kept: it depends on a step that is not
        return f"discarded: it depends on step {lost[0]}, which is not kept"
    return f"{status}: {record.get('error') or ''}"


def replan(state: State, runtime: Runtime[Context], *, tools: ToolRegistry) -> dict[str, Any]:
    """Ask the planner model for the remaining work and merge it with the kept steps."""
    ctx = context_of(runtime.context)
    plan = state["plan"]
    assert plan is not None
    records = state.get("steps", {})
    kept_steps = keepable(plan["steps"], current_records(plan, records))
    lost_steps = [s for s in plan["steps"] if s not in kept_steps]
    kept_ids = frozenset(s["id"] for s in kept_steps)
    max_id = max(s["id"] for s in plan["steps"])
    kept_text = (
        "\n".join(
            f"- step {s['id']} [{s['tool']}] {s['description']} -> "
            f"{records[str(s['id'])].get('summary', '')}"
            for s in kept_steps
        )
        or "(none)"
    )
    failed_text = "\n".join(
        f"- step {s['id']} [{s['tool']}] args={json.dumps(s['args'], default=str)}: "
        f"{_outcome_text(s, records, kept_ids)}"
        for s in lost_steps
    )
    messages = [
        SystemMessage(
            prompts.PLANNER_SYSTEM.format(max_steps=ctx.max_steps, tools=tools.describe())
        ),
        HumanMessage(
            prompts.REPLANNER.format(
                goal=plan["goal"], kept=kept_text, failed=failed_text, max_id=max_id
            )
        ),
    ]
    result = request_plan(
        models.load_chat_model(ctx.planner_model),
        messages,
        tools,
        role="replanner",
        max_steps=ctx.max_steps,
        max_repairs=ctx.max_plan_repairs,
        kept=kept_ids,
    )
    replans = state.get("replans", 0) + 1
    base: dict[str, Any] = {"replans": replans, "usage": result.usage}
    if result.plan is None:
        return {
            **base,
            "error": "the replanner gave no valid revision: " + "; ".join(result.errors[:10]),
        }

    new_steps = result.plan.steps
    clash = sorted({s.id for s in new_steps} & kept_ids)
    failed_signatures = {_signature(s) for s in lost_steps}
    if clash:
        return {**base, "error": f"the replanner reused the ids of kept steps {clash}"}
    if all(_signature(s.model_dump()) in failed_signatures for s in new_steps):
        return {
            **base,
            "error": "the replanner proposed the same failing steps again; "
            "stopping with a partial result",
        }
    merged = Plan(goal=plan["goal"], steps=[*map(Step.model_validate, kept_steps), *new_steps])
    try:
        validate_plan(merged.model_dump(), tools, max_steps=ctx.max_steps + len(kept_steps))
    except PlanValidationError as exc:
        return {**base, "error": "the revised plan is invalid: " + "; ".join(exc.errors)}

    new_plan: PlanDoc = to_doc(merged, version=plan["version"] + 1)
    new_records: dict[str, StepRecord] = {str(s["id"]): records[str(s["id"])] for s in kept_steps}
    for step in new_steps:
        new_records[record_key(step.id)] = pending_record()
    failures = "; ".join(
        f"step {s['id']}: {records.get(str(s['id']), {}).get('error')}"
        for s in lost_steps
        if records.get(str(s["id"]), {}).get("status") == "failed"
    )
    return {
        **base,
        "plan": new_plan,
        "proposed": ProposedPlan(
            version=new_plan["version"],
            digest=plan_digest(new_plan),
            by="replanner",
            base=plan_digest(plan),
            added=[s.id for s in new_steps],
        ),
        "steps": new_records,
        "evaluation": None,
        "revisions": [
            Revision(
                version=plan["version"],
                reason=f"replanned after failures: {failures}",
                plan=plan,
                outcomes=dict(records),
            )
        ],
    }
