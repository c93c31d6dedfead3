"""Approval policies: whether the current plan must be shown to a human."""

from __future__ import annotations

from planexec.context import ApprovalPolicy
from planexec.plan.doc import plan_of, step_tools
from planexec.state import State
from planexec.tools.registry import ToolRegistry

POLICY_ORDER: dict[ApprovalPolicy, int] = {"never": 0, "first": 1, "always": 2}


def effective_policy(operator: ApprovalPolicy, requested: ApprovalPolicy | None) -> ApprovalPolicy:
    """Return the policy in force: the operator's, or the stricter one a run asks for.

    The operator's (``build_graph(approval=...)``, else ``$PLANEXEC_APPROVAL``, else
    ``first``) is the policy of every run that sets none (``Context.approval`` unset); a run
    (its context, e.g. over the API) may ask for more approvals, never for fewer.
    """
    if requested is None:
        return operator
    return max(operator, requested, key=POLICY_ORDER.__getitem__)


def runs_unapproved(policy: ApprovalPolicy) -> bool:
    """Say whether no plan needs a human under ``policy`` (the one in force): ``never``.

    Then the planner starts steps while it writes the plan
    (:mod:`planexec.execution.streaming`); with any other policy nothing runs before the
    approval node has recorded the plan's approval.
    """
    return policy == "never"


def needs_approval(state: State, policy: ApprovalPolicy, tools: ToolRegistry, digest: str) -> bool:
    """Decide from the policy whether the current plan must be shown to a human.

    ``first`` lets only a replanner's own revision run without asking: unchanged since the
    replanner wrote it, made from the approved plan, and adding no step that may call a
    side-effecting tool.
    """
    if policy == "never":
        return False
    if policy == "always":
        return True
    approved, proposed, plan = state.get("approved"), state.get("proposed"), plan_of(state)
    if not approved or not proposed or proposed.get("by") != "replanner":
        return True
    if proposed.get("digest") != digest or proposed.get("base") != approved["digest"]:
        return True
    added = set(proposed.get("added") or [])
    return any(
        tools.has_side_effects(t)
        for step in plan["steps"]
        if step["id"] in added
        for t in step_tools(step)
    )
