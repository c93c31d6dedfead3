"""Who may answer an approval or a failed step's question, and until when: the operator's rules.

Set with ``build_graph(approvers=..., separate_approver=..., approval_expires_after=...)`` or
the environment (``PLANEXEC_APPROVERS``, ``PLANEXEC_SEPARATE_APPROVER``,
``PLANEXEC_APPROVAL_EXPIRES_AFTER``), checked when the graph is built. :func:`refusal` decides
every answer of both the approval and the failure review nodes; :func:`expired` says whether
an answer came too late.

* ``approvers``: identities (``alice``) or server permissions (``permission:approve``). Then
  going ahead (approve, edit, and a failed step's retry, skip and replan) needs an approver;
  reject and cancel need an approver or whoever started the run; an unknown caller is refused.
* ``separate_approver``: whoever started the run may not let a plan with side effects go ahead
  (approve, edit, retry, skip); they may still reject or cancel. Who answers and who started
  must both be known, or the answer is refused. Whoever wrote the plan version asked about (an
  approver's ``edit``, a failed step's retry with new arguments: :func:`maker_of`) is its maker
  too: their edit adding side effects is a new proposal, not an approval, and another approver
  must approve it.
* ``approval_expires_after`` (seconds): an answer after the request's ``expires_at`` is not
  taken (a decision ``expired``) and the question is asked again, with a fresh request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from langchain_core.runnables import RunnableConfig

from planexec.errors import ConfigurationError
from planexec.plan.doc import plan_digest, plan_tools
from planexec.review.identity import describe_identity, permissions_of
from planexec.state import Decision, Identity, PlanDoc, State
from planexec.tools.registry import ToolRegistry

PERMISSION = "permission:"
"""How an approvers item names a permission the server's auth grants (``permission:approve``)."""
GO_AHEAD = frozenset({"approve", "edit", "retry", "skip", "replan"})
"""Answers that let work go on: only approvers may give them (when approvers are set)."""
STOP = frozenset({"reject", "cancel"})
"""Answers that stop or send back a plan: approvers and whoever started the run may give them."""
CHECKED_BY_ANOTHER = frozenset({"approve", "edit", "retry", "skip"})
"""Answers that run a plan's side effects: not its starter's under ``separate_approver``."""
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class ApprovalRules:
    """The operator's rules for answers (none set: anyone may give any answer, at any time)."""

    approvers: tuple[str, ...] = ()
    separate_approver: bool = False
    expires_after: float | None = None

    def expires_at(self, asked_at: str) -> str | None:
        """Return when a request asked at ``asked_at`` expires (None: never)."""
        if self.expires_after is None:
            return None
        asked = datetime.fromisoformat(asked_at)
        return (asked + timedelta(seconds=self.expires_after)).isoformat()


def rules_from(
    approvers: str | Iterable[str] | None = None,
    separate_approver: bool | None = None,
    expires_after: float | None = None,
) -> ApprovalRules:
    """Return the rules ``build_graph`` was given, else the environment's; refuse bad values.

    Raises :class:`~planexec.errors.ConfigurationError` naming the setting.
    """
    if approvers is None:
        approvers = os.environ.get("PLANEXEC_APPROVERS") or None
    names = _approvers(approvers)
    if separate_approver is None:
        separate_approver = _flag(os.environ.get("PLANEXEC_SEPARATE_APPROVER", ""))
    elif not isinstance(separate_approver, bool):
        raise ConfigurationError(
            f"separate_approver (build_graph) is true or false, not {separate_approver!r}"
        )
    if expires_after is None:
        expires_after = _seconds(os.environ.get("PLANEXEC_APPROVAL_EXPIRES_AFTER") or None)
    elif (
        isinstance(expires_after, bool)
        or not isinstance(expires_after, int | float)
        or not math.isfinite(expires_after)
        or expires_after <= 0
    ):
        raise ConfigurationError(
            "approval_expires_after (build_graph) is a positive number of seconds, "
            f"not {expires_after!r}"
        )
    return ApprovalRules(names, separate_approver, float(expires_after) if expires_after else None)


def judge(
    rules: ApprovalRules,
    action: str,
    who: Identity,
    config: RunnableConfig,
    state: State,
    plan: PlanDoc,
    tools: ToolRegistry,
) -> str | None:
    """Return why ``who`` may not answer ``action`` about ``plan`` in this run, or None.

    What both asking nodes call: :func:`refusal` with the server's permissions, the run's
    starter, whether ``plan`` may call a side-effecting tool, and who wrote that plan version.
    """
    return refusal(
        rules,
        action=action,
        who=who,
        permissions=permissions_of(config),
        started_by=state.get("started_by"),
        side_effects=any(tools.has_side_effects(t) for t in plan_tools(plan)),
        made_by=maker_of(state.get("decisions"), plan_digest(plan)),
    )


def refusal(
    rules: ApprovalRules,
    *,
    action: str,
    who: Identity,
    permissions: frozenset[str],
    started_by: Identity | None,
    side_effects: bool,
    made_by: Identity | None = None,
) -> str | None:
    """Return why ``who`` may not give this answer, or None if they may.

    ``action`` is the answer (``approve``, ``edit``, ``reject``, ``cancel``, or a failed
    step's ``retry``, ``skip``, ``replan``); ``side_effects``: whether the plan it lets go
    ahead may call a side-effecting tool; ``started_by``: who started the run; ``made_by``: who
    wrote the plan version answered about, if a reviewer did (:func:`maker_of`).
    """
    name = describe_identity(who)
    starter = started_by["id"] if started_by else None
    is_starter = who["id"] is not None and who["id"] == starter
    if rules.approvers:
        listed = ", ".join(rules.approvers)
        if who["id"] is None and (action in GO_AHEAD or action in STOP):
            return (
                f"{name} may not {action}: approvers are set and who answers is unknown "
                f"(approvers: {listed})"
            )
        approver = is_approver(rules, who, permissions)
        if action in GO_AHEAD and not approver:
            return f"{name} may not {action}: not an approver (approvers: {listed})"
        if action in STOP and not approver and not is_starter:
            return (
                f"{name} may not {action}: neither an approver nor who started this run "
                f"(approvers: {listed})"
            )
    if rules.separate_approver and side_effects and action in CHECKED_BY_ANOTHER:
        if who["id"] is None:
            return (
                f"{name} may not {action}: the plan has side effects and needs an approver other "
                "than who started the run (separate_approver), and who answers is unknown"
            )
        if starter is None:
            return (
                f"{name} may not {action}: the plan has side effects and needs an approver other "
                "than who started the run (separate_approver), and who started it is unknown"
            )
        if is_starter:
            return (
                f"{name} may not {action}: {name} started this run and the plan has side effects "
                f"(separate_approver: another approver must approve it; {name} may reject or "
                "cancel it)"
            )
        if made_by is not None and made_by["id"] is not None and made_by["id"] == who["id"]:
            return (
                f"{name} may not {action}: {name} wrote this plan version and it has side "
                f"effects (separate_approver: another approver must approve it; {name} may "
                "reject or cancel it)"
            )
    return None


def maker_of(decisions: Sequence[Decision] | None, digest: str) -> Identity | None:
    """Return who wrote the plan of ``digest`` by an answer (an edit, a retry with new args).

    None when no recorded answer made it (the planner or replanner did, or a state edit).
    """
    for decision in reversed(decisions or []):
        edited = decision.get("edited")
        if edited is not None and edited["digest"] == digest and "by" in decision:
            return decision["by"]
    return None


def proposes_only(rules: ApprovalRules, side_effects: bool) -> bool:
    """Tell whether a reviewer's edit to a plan is only a proposal, to be approved by another.

    Under ``separate_approver`` an edit whose plan may call a side-effecting tool is recorded
    but not approved: its writer is its maker, and another approver must approve it.
    """
    return rules.separate_approver and side_effects


def is_approver(rules: ApprovalRules, who: Identity, permissions: frozenset[str]) -> bool:
    """Tell whether ``who`` is listed, or holds a permission listed as ``permission:NAME``."""
    if who["id"] is None:
        return False
    return any(
        permission[len(PERMISSION) :] in permissions
        if permission.startswith(PERMISSION)
        else permission == who["id"]
        for permission in rules.approvers
    )


def expired(expires_at: str | None, now: str) -> bool:
    """Tell whether an answer at ``now`` (ISO-8601) came after the request's ``expires_at``."""
    return expires_at is not None and datetime.fromisoformat(now) > datetime.fromisoformat(
        expires_at
    )


def utc_now() -> str:
    """Return the time now, ISO-8601 UTC (the form decisions and requests carry)."""
    return datetime.now(UTC).isoformat()


def _approvers(approvers: str | Iterable[str] | None) -> tuple[str, ...]:
    if approvers is None:
        return ()
    items = approvers.split(",") if isinstance(approvers, str) else list(approvers)
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigurationError(
                f"approvers (build_graph or PLANEXEC_APPROVERS): {item!r} is not text"
            )
        name = item.strip()
        if not name or name == PERMISSION:
            raise ConfigurationError(
                f"approvers (build_graph or PLANEXEC_APPROVERS) has an empty item in {approvers!r}"
                ": give identities (alice) or permissions (permission:approve), comma-separated"
            )
        names.append(name)
    if not names:
        raise ConfigurationError(
            "approvers (build_graph or PLANEXEC_APPROVERS) is empty: no one could approve"
        )
    return tuple(dict.fromkeys(names))


def _flag(value: str) -> bool:
    text = value.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ConfigurationError(f"PLANEXEC_SEPARATE_APPROVER is true or false, not {value!r}")


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(
            f"PLANEXEC_APPROVAL_EXPIRES_AFTER is a positive number of seconds, not {value!r}"
        )
    return seconds
