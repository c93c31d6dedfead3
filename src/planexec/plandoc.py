"""The plan as state keeps it (:class:`~planexec.state.PlanDoc`): run order, digests, tools.

A plan's digest names its content: approval records it and the executor runs only the approved
digest. A step's digest names one step's content: a step record counts only for that content
(:func:`planexec.records.current_records`).
"""

from __future__ import annotations

import hashlib
import json
from graphlib import TopologicalSorter
from typing import Any

from planexec.errors import PlanexecError
from planexec.state import PlanDoc, State, StepDoc


class NoPlanError(PlanexecError):
    """The thread holds no plan where a node needs one (e.g. a state edit removed it)."""


def plan_of(state: State) -> PlanDoc:
    """Return the thread's plan; raise :class:`NoPlanError` if it has none (not an assert)."""
    plan = state.get("plan")
    if plan is None:
        raise NoPlanError("this thread has no plan: start a new task")
    return plan


def step_tools(step: StepDoc) -> list[str]:
    """Return the tools a step may call: its own tool, or the tools its step lists.

    A tool-less step stored before steps had a ``tools`` field may call none.
    """
    if step["tool"] is not None:
        return [step["tool"]]
    return list(step.get("tools") or [])


def plan_tools(plan: PlanDoc) -> list[str]:
    """Return every tool a plan may call (tool steps and the tools steps list), sorted."""
    return sorted({name for step in plan["steps"] for name in step_tools(step)})


def topological_order(steps: list[StepDoc]) -> list[StepDoc]:
    """Return the steps so every step comes after its dependencies, ties in plan order."""
    position = {s["id"]: i for i, s in enumerate(steps)}
    graph = {s["id"]: [d for d in s["depends_on"] if d in position] for s in steps}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    ordered: list[StepDoc] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        for sid in ready:
            ordered.append(steps[position[sid]])
            sorter.done(sid)
    return ordered


def _sha256_of(content: Any) -> str:
    canonical = json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def step_digest(step: StepDoc | dict[str, Any], goal: str) -> str:
    """Return the SHA-256 of one step's content; a step record is valid only for that content.

    A tool-less step's model also sees the plan's goal, so its digest covers the goal too.
    """
    return _sha256_of(step if step.get("tool") else {"goal": goal, "step": step})


def plan_digest(plan: PlanDoc | dict[str, Any]) -> str:
    """Return the SHA-256 of a plan's content (goal and steps, canonical JSON).

    The version is not part of it: two plans with the same goal and steps are the same plan.
    An approval records this digest, and the executor runs a plan only if its digest is the
    approved one.
    """
    return _sha256_of({"goal": plan.get("goal"), "steps": plan.get("steps")})
