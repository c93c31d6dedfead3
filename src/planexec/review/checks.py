"""Checks at the approval step: is the plan valid, and does an answer name this plan."""

from __future__ import annotations

from planexec.context import Context
from planexec.plan import PlanValidationError, validate_plan
from planexec.review.decisions import AnswerRefused
from planexec.state import PlanDoc, State
from planexec.tools.registry import ToolRegistry


def step_limit(state: State, ctx: Context) -> int:
    """Most steps an approved plan may have: the limit, plus steps kept from earlier rounds."""
    kept = sum(1 for r in (state.get("steps") or {}).values() if r.get("status") == "succeeded")
    return ctx.max_steps + kept


def plan_problems(plan: PlanDoc, tools: ToolRegistry, max_steps: int) -> list[str]:
    """Validate a plan as stored in state; return its problems (empty when it may run)."""
    try:
        validate_plan({"goal": plan["goal"], "steps": plan["steps"]}, tools, max_steps=max_steps)
    except PlanValidationError as exc:
        return exc.errors
    except (KeyError, TypeError):
        return ["the plan in state is not a plan document (goal, steps, version)"]
    return []


def check_names(version: object, digest: object, plan: PlanDoc, current: str, state: State) -> None:
    """Refuse an answer that names a plan other than the one awaiting approval.

    ``current`` is that plan's digest. A version names a plan only while it is as planexec
    proposed it: a state edit may keep the version and change the content, so such a plan
    must be named by its digest. Raises :class:`AnswerRefused` saying which plan to look at.
    """
    proposed = state.get("proposed")
    edited = not proposed or proposed.get("digest") != current
    if version is not None and digest is None and edited:
        raise AnswerRefused(
            f"the plan awaiting approval was changed by a state edit after it was proposed, so "
            f"its version does not identify it; answer with its digest {current}"
        )
    if version is not None and version != plan["version"]:
        raise AnswerRefused(
            f"this answer is about plan version {version}, but version {plan['version']} "
            f"(digest {current}) is awaiting approval; look at it and answer again"
        )
    if digest is not None and digest != current:
        raise AnswerRefused(
            f"this answer is about the plan with digest {digest}, but the plan awaiting "
            f"approval (version {plan['version']}) has digest {current}; look at it and "
            "answer again"
        )
