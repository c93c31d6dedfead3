"""Routers: where the graph goes after each deciding node (typed so Studio draws every edge)."""

from __future__ import annotations

from typing import Literal

from planexec.state import State


def after_planner(state: State) -> Literal["approval", "finalizer"]:
    """Send a valid plan to approval; end the run on a planning failure."""
    return "finalizer" if state.get("error") else "approval"


AfterApproval = Literal["executor", "planner", "finalizer", "approval", "speculator"]
AFTER_APPROVAL: list[AfterApproval] = ["executor", "planner", "finalizer", "approval", "speculator"]
"""Where the graph may go after the approval (given to LangGraph: the router may return two)."""


def after_approval(state: State) -> AfterApproval | list[AfterApproval]:
    """Approved (or edited) plans run; rejected ones go back to the planner; cancel ends.

    A refused answer asks again (one interrupt per node run, so decisions are never re-judged),
    and so does a run that only showed the plan in the chat (``presented``): beside it, the
    speculator runs the plan's read-only steps when the approval said so (``speculate``), and
    after a reject or a cancel of such a plan it runs again, to discard their results.
    """
    record = state.get("approval") or {}
    action = record.get("action")
    if action == "presented" and record.get("speculate"):
        return ["approval", "speculator"]
    if action in ("reject", "cancel"):
        after: AfterApproval = "planner" if action == "reject" else "finalizer"
        # results speculated now (not in state yet: the flag) or before (in state)
        discarding = record.get("speculate") or state.get("speculated")
        return [after, "speculator"] if discarding else after
    if action in ("refused", "presented"):
        return "approval"
    return "executor"


def after_executor(state: State) -> Literal["evaluator", "approval"]:
    """Results go to the evaluator; a plan the executor refused to run goes back to approval."""
    action = (state.get("approval") or {}).get("action")
    return "approval" if action == "not_approved" else "evaluator"


def after_evaluator(
    state: State,
) -> Literal["executor", "replanner", "failure_review", "finalizer"]:
    """Follow the evaluator's decision."""
    evaluation = state.get("evaluation")
    decision = evaluation["decision"] if evaluation else None
    if decision == "retry":
        return "executor"
    if decision == "replan":
        return "replanner"
    if decision == "ask":
        return "failure_review"
    return "finalizer"


def after_failure_review(
    state: State,
) -> Literal["executor", "approval", "replanner", "failure_review", "evaluator", "finalizer"]:
    """Follow the reviewer's answer about a failed step (a refused answer asks again).

    A question just shown (``failure_question`` recorded, no answer yet) is asked next.
    """
    action = (state.get("failure_answer") or {}).get("action")
    if action is None and state.get("failure_question"):
        return "failure_review"
    if action == "refused":
        return "failure_review"
    if action == "edit":  # a changed step is a new plan: the approval applies the policy
        return "approval"
    if action == "replan":
        return "replanner"
    if action == "cancel":
        return "finalizer"
    if action == "skip":
        records = state.get("steps") or {}
        return (
            "executor"
            if any(r.get("status") == "pending" for r in records.values())
            else "evaluator"
        )
    return "executor"


def after_replanner(state: State) -> Literal["approval", "finalizer"]:
    """Send a revised plan to approval (which applies the policy); end on a failed revision."""
    return "finalizer" if state.get("error") else "approval"
