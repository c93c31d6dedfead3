"""Summary node: the last node of an embedded graph, writing what its parent is given.

A graph built with ``build_graph(output="embedded")`` returns only ``messages`` and
``planexec`` (:class:`planexec.state.EmbeddedOutput`); this node fills ``planexec`` from the
finished run's state, after the finalizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planexec.plan.doc import plan_digest
from planexec.state import PlanDoc, PlanexecSummary, PlanSummary, State, StepSummary


def summarize(state: Mapping[str, Any]) -> PlanexecSummary:
    """Return the summary of a finished run's state (or of a standalone graph's output)."""
    final = state.get("final") or {}
    plan: PlanDoc | None = state.get("plan")
    return PlanexecSummary(
        task=str(state.get("task") or ""),
        status=final.get("status", "failed"),
        answer=str(final.get("answer") or state.get("error") or ""),
        artifacts=list(final.get("artifacts") or []),
        failed_steps=[int(f["step"]) for f in final.get("failed_steps") or [] if "step" in f],
        plan=_plan_summary(plan) if plan else None,
        revisions=len(state.get("revisions") or []),
        usage=dict(state.get("usage") or {}),
        error=state.get("error"),
    )


def _plan_summary(plan: PlanDoc) -> PlanSummary:
    return PlanSummary(
        goal=plan["goal"],
        version=plan["version"],
        digest=plan_digest(plan),
        steps=[
            StepSummary(
                id=s["id"],
                description=s["description"],
                tool=s["tool"],
                tools=list(s.get("tools") or []),
            )
            for s in plan["steps"]
        ],
    )


def write_summary(state: State) -> dict[str, PlanexecSummary]:
    """Write the run's summary under ``planexec``, the key a parent graph reads."""
    return {"planexec": summarize(state)}
