"""The plan as state keeps it (:class:`~planexec.state.PlanDoc`): run order, digests, tools.

A plan's digest names its content: approval records it and the executor runs only the approved
digest. A step's digest names one step's content: a step record counts only for that content
(:func:`planexec.plan.records.current_records`).
"""

from __future__ import annotations

import hashlib
import json
from graphlib import CycleError
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
    """Return the steps so every step comes after its dependencies, ties in plan order.

    Level by level, as :class:`graphlib.TopologicalSorter` gives them (each batch of steps that
    became ready, in plan order), without its per-node bookkeeping: the executor, the records
    and the evaluator order every plan several times a run. Raises
    :class:`graphlib.CycleError` (as the sorter does) if the dependencies form a cycle.
    """
    position = {s["id"]: i for i, s in enumerate(steps)}
    waiting: dict[Any, int] = {}
    dependents: dict[Any, list[Any]] = {}
    for sid, i in position.items():  # a repeated id counts once: its last step, as in graphlib
        deps = [d for d in steps[i]["depends_on"] if d in position]
        waiting[sid] = len(deps)
        for dep in deps:
            dependents.setdefault(dep, []).append(sid)
    batch = [sid for sid, n in waiting.items() if n == 0]
    ordered: list[StepDoc] = []
    while batch:
        batch.sort(key=position.__getitem__)
        ready: list[Any] = []
        for sid in batch:
            ordered.append(steps[position[sid]])
            for child in dependents.get(sid, ()):
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready.append(child)
        batch = ready
    if len(ordered) < len(position):
        raise CycleError("nodes are in a cycle", [s for s, n in waiting.items() if n > 0])
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
