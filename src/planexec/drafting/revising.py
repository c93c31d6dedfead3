"""Revising a plan around failures: which steps a revision keeps, and what the model is told.

The replanner node (:mod:`planexec.nodes.replanner`) drafts the remaining work with these.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from planexec.llm import prompts
from planexec.plan.doc import topological_order
from planexec.plan.records import record_key
from planexec.state import PlanDoc, StepDoc, StepRecord
from planexec.storage.outputs import summarize
from planexec.tools.registry import ToolRegistry


def keepable(steps: list[StepDoc], records: dict[str, StepRecord]) -> list[StepDoc]:
    """Return the steps a revision keeps: succeeded, and every step they depend on kept too.

    A success built on a step that is not kept is lost with it, so the kept steps never
    depend on a step the revision drops (which would make the merged plan invalid).
    """
    kept: set[int] = set()
    for step in topological_order(steps):
        if records.get(record_key(step["id"]), {}).get("status") == "succeeded" and all(
            d in kept for d in step["depends_on"]
        ):
            kept.add(step["id"])
    return [s for s in steps if s["id"] in kept]


def signature(step: StepDoc | dict[str, Any]) -> str:
    """Identify what a step does: its tool call (a model step by its description and tools)."""
    what = (
        [step["tool"], step["args"]]
        if step["tool"]
        else [None, step["args"], step["description"], sorted(step.get("tools") or [])]
    )
    return json.dumps(what, sort_keys=True, default=str)


def outcome_text(step: StepDoc, records: dict[str, StepRecord], kept: frozenset[int]) -> str:
    """Say how a step that is not kept ended (succeeded ones: why they are not kept)."""
    record = records.get(record_key(step["id"]), {})
    status = record.get("status", "pending")
    lost = [d for d in step["depends_on"] if d not in kept]
    if status == "succeeded" and lost:  # not kept: it depends on a step that is not
        return f"discarded: it depends on step {lost[0]}, which is not kept"
    return f"{status}: {record.get('error') or ''}"


KEPT_PROFILE_CHARS = 1200


def kept_profile(record: StepRecord) -> str:
    """Return a kept step's output on one bounded line (a table's columns fit, not its rows)."""
    output = record.get("output")
    if output is None:
        return record.get("summary", "")
    return summarize(output, KEPT_PROFILE_CHARS)


def replanner_messages(
    plan: PlanDoc,
    records: dict[str, StepRecord],
    kept_steps: list[StepDoc],
    max_steps: int,
    tools: ToolRegistry,
) -> list[BaseMessage]:
    """Build the replanner's conversation: the planner's rules, what is kept, what failed."""
    kept_ids = frozenset(s["id"] for s in kept_steps)
    kept_text = (
        "\n".join(
            f"- step {s['id']} [{s['tool']}] {s['description']} -> "
            f"{kept_profile(records[record_key(s['id'])])}"
            for s in kept_steps
        )
        or "(none)"
    )
    failed_text = "\n".join(
        f"- step {s['id']} [{s['tool']}] args={json.dumps(s['args'], default=str)}: "
        f"{outcome_text(s, records, kept_ids)}"
        for s in plan["steps"]
        if s["id"] not in kept_ids
    )
    return [
        SystemMessage(prompts.PLANNER_SYSTEM.format(max_steps=max_steps, tools=tools.describe())),
        HumanMessage(
            prompts.REPLANNER.format(
                goal=plan["goal"],
                kept=kept_text,
                failed=failed_text,
                first_id=max(kept_ids, default=0) + 1,  # ids implied by position start there
                second_id=max(kept_ids, default=0) + 2,
            )
        ),
    ]
