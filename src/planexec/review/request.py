"""What the approval interrupt shows the reviewer: the plan, what identifies it, and why."""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from planexec.context import Context
from planexec.plan.doc import plan_tools
from planexec.plan.records import current_records, record_key
from planexec.plan.shapes import compact
from planexec.review import describe, hitl
from planexec.review.decisions import SHAPES
from planexec.review.estimate import Estimate, estimate, estimate_lines
from planexec.review.hitl import HitlFields
from planexec.state import Decision, PlanDoc, State
from planexec.tools.registry import ToolRegistry

HISTORY_LIMIT = 20
"""Most decisions the request shows (the latest)."""
PRODUCES_LIMIT = 160
"""Characters of a step's output shape the approval shows."""
INVALID_PLAN = "this plan is invalid and cannot be approved (edit, reject or cancel it): "
"""How a refusal to approve an invalid plan begins (its problems follow)."""


ANSWER_SCHEMA: dict[str, Any] = dict(
    title="planexec plan approval answer",
    description=(
        "planexec's own answer (the request's 'answers' shows each); a LangChain v1 HITL "
        "answer, a legacy Agent Inbox one or the action's name as text are taken too. Every "
        "shape's full schema: planexec.review.decisions.response_schema()."
    ),
    type="object",
    properties={
        "action": {"enum": ["approve", "edit", "reject", "cancel"]},
        "digest": {"type": "string"},
        "version": {"type": "integer"},
        "plan": {"type": "object", "description": "edit: the plan shown, changed"},
        "feedback": {"type": "string", "description": "reject: what to change"},
        "reason": {"type": "string", "description": "cancel: why (optional)"},
    },
    required=["action"],
)
"""The answer schema every pause publishes (``Interrupt.response_schema``): planexec's own
answer, the other accepted shapes named in its description. Small (under 1 KB of JSON), so a
pause does not carry the full schema of every shape (5.6 KB:
:func:`planexec.review.decisions.response_schema`, for clients that want it)."""


def invalid_plan(problems: list[str]) -> str:
    """Say why approving a plan with these problems is refused."""
    return INVALID_PLAN + "; ".join(problems)


def plan_changed(shown_version: object, shown_digest: object, plan: PlanDoc, digest: str) -> str:
    """Say why an answer is refused: the plan changed since its request showed another.

    ``the plan changed since it was shown (v1 9f2c1a0b… → v2 ab12cd34…): answer again``.
    """
    was = f"v{shown_version if shown_version is not None else '?'} {str(shown_digest or '?')[:8]}…"
    now = f"v{plan['version']} {digest[:8]}…"
    return f"the plan changed since it was shown ({was} → {now}): answer again"


def refusal_now(error: str | None, problems: list[str]) -> str | None:
    """Return why the previous answer was refused, as it holds for the plan now.

    A refusal of an invalid plan is about its problems, which depend on the tools of the run
    that asks (a resume may bring the tools the plan names): it names the problems found now,
    and is gone when there are none.
    """
    if error and error.startswith(INVALID_PLAN):
        return invalid_plan(problems) if problems else None
    return error


class SpeculatedResult(TypedDict):
    """A step that ran while its plan awaits approval, as the request shows it."""

    status: str
    summary: str
    error: NotRequired[str]
    approved: bool
    """Always false: the approved plan takes the result only for an unchanged step."""


class SpeculationView(TypedDict):
    """Which steps run while the plan is asked about (read-only), and their results so far."""

    steps: list[int]
    results: dict[str, SpeculatedResult]


class ApprovalRequest(HitlFields):
    """The interrupt's payload (JSON): answer it with one of ``answers``.

    It is also a LangChain v1 HITL request and a legacy Agent Inbox interrupt
    (:class:`~planexec.review.hitl.HitlFields`): one action, ``run_plan``, whose args are the plan.
    """

    type: Literal["plan_approval"]
    plan: PlanDoc
    version: int
    digest: str
    origin: str
    """Who made the plan: ``planner``, ``replanner``, ``reviewer``, or ``state edit``."""
    side_effect_tools: list[str]
    produces: dict[str, str]
    """What each tool step's tool declares it returns, in a line (step id: shape)."""
    side_effect_notes: NotRequired[dict[str, str]]
    """Why some of them are side-effecting: an MCP tool's ``destructive per the server's hint``,
    ``side effects not declared`` for a tool that declares nothing
    (:meth:`~planexec.tools.registry.ToolRegistry.side_effect_note`)."""
    problems: list[str]
    """Why the plan is invalid (it can then be edited, rejected or cancelled, not approved)."""
    error: str | None
    """Why the previous answer was refused, when this asks again."""
    answers: str
    estimate: Estimate
    """Model calls, tokens and cost spent so far and expected for the plan; its slowest chain."""
    memory: dict[str, Any] | None
    """Where plan memory took the plan from (run, task, how, changes), when it did."""
    already_ran: dict[str, str]
    """Steps of the plan that have run before this approval (step id: how it ended)."""
    asked_at: str | None
    """When this question was first asked (ISO-8601 UTC; None in the chat's preview)."""
    expires_at: str | None
    """When an answer stops being taken (``approval_expires_after``); None: never."""
    history: list[Decision]
    """The thread's decisions so far (the latest :data:`HISTORY_LIMIT`), oldest first."""
    speculation: NotRequired[SpeculationView]
    """Present when read-only steps run while this request waits (``Context.speculate``)."""


def approval_request(
    state: State,
    plan: PlanDoc,
    digest: str,
    problems: list[str],
    tools: ToolRegistry,
    ctx: Context,
    *,
    asked_at: str | None = None,
    expires_at: str | None = None,
    speculation: SpeculationView | None = None,
) -> ApprovalRequest:
    """Build the interrupt's payload: the plan, what identifies it, and why it is asked again."""
    proposed = state.get("proposed")
    previous = state.get("approval") or {}
    asked_again = previous.get("action") in ("refused", "not_approved", "presented")
    error = refusal_now(previous.get("error"), problems) if asked_again else None
    side_effects = [t for t in plan_tools(plan) if tools.has_side_effects(t)]
    produced = produces(plan, tools)
    notes = {t: note for t in side_effects if (note := tools.side_effect_note(t))}
    calls = describe.estimate_model_calls(
        plan, max_turns=ctx.max_executor_turns, judge=ctx.llm_judge
    )
    found = estimate(state, plan, tools, ctx)
    origin_of_plan = proposed["by"] if proposed and proposed["digest"] == digest else "state edit"
    by_memory = proposed is not None and proposed.get("by") == "memory"
    memory = state.get("plan_origin") if by_memory and origin_of_plan == "memory" else None
    ran = already_ran(state, plan)
    lines = [
        *memory_lines(memory),
        *ran_lines(ran),
        *speculation_lines(speculation),
        *estimate_lines(found),
    ]
    description = describe.describe_plan(
        plan, side_effects, calls, problems, lines, produces=produced, notes=notes
    )
    request = ApprovalRequest(
        **hitl.requests(plan, description, can_approve=not problems),  # type: ignore[typeddict-item]
        type="plan_approval",
        plan=plan,
        version=plan["version"],
        digest=digest,
        origin=origin_of_plan,
        side_effect_tools=side_effects,
        produces=produced,
        side_effect_notes=notes,
        problems=problems,
        error=error,
        answers=SHAPES,
        estimate=found,
        memory=memory,
        already_ran=ran,
        asked_at=asked_at,
        expires_at=expires_at,
        history=list((state.get("decisions") or [])[-HISTORY_LIMIT:]),
    )
    if speculation is not None:
        request["speculation"] = speculation
    return request


def produces(plan: PlanDoc, tools: ToolRegistry) -> dict[str, str]:
    """Return what each tool step produces, in a line, for steps whose tool declares it."""
    shown: dict[str, str] = {}
    for step in plan["steps"]:
        schema = tools.output_schema(step["tool"]) if step["tool"] in tools else None
        if schema is not None:
            shown[str(step["id"])] = compact(schema, limit=PRODUCES_LIMIT)
    return shown


def already_ran(state: State, plan: PlanDoc) -> dict[str, str]:
    """Return the plan's steps that have run already (step id: status), in plan order.

    Under approval ``never`` steps start while the plan streams; a run resumed under a stricter
    policy asks about a plan some of whose steps ran.
    """
    records = current_records(plan, state.get("steps") or {})
    return {
        key: str(records[key].get("status"))
        for key in (record_key(s["id"]) for s in plan["steps"])
        if records[key].get("status") in ("succeeded", "failed")  # skipped: it did not run
    }


def ran_lines(ran: dict[str, str] | None) -> list[str]:
    """Tell the reviewer which steps ran before this approval (none: nothing to say)."""
    if not ran:
        return []
    steps = ", ".join(f"{sid} ({status})" for sid, status in ran.items())
    return [f"Already ran, before this approval: step {steps}."]


def speculation_lines(speculation: SpeculationView | None) -> list[str]:
    """Tell the reviewer which read-only steps run while they read, and what they gave so far.

    What chat UIs and Studio show of the request (its description) says it too, not only the
    payload's ``speculation``.
    """
    if not speculation:
        return []
    steps = ", ".join(str(sid) for sid in sorted(speculation["steps"]))
    lines = [
        f"Running now, while you read (read-only): step {steps}. Their results are not "
        "approved: an approved step keeps its result only if you approve it unchanged; they "
        "appear in the thread's `speculated` as they end."
    ]
    for sid, result in sorted(speculation["results"].items(), key=lambda item: int(item[0])):
        said = f"{result['status']}: {result.get('error') or result['summary']}"
        lines.append(f"Step {sid} ran before approval (not approved yet): {said}")
    return lines


def memory_lines(origin: dict[str, Any] | None) -> list[str]:
    """Say where plan memory took the plan from and what it changed (none: not from memory)."""
    if not origin:
        return []
    how = (
        "the task's values put in, no model call"
        if origin.get("how") == "same shape"
        else "adapted by the cheap model"
    )
    changes = "; ".join(map(str, origin.get("changes") or [])) or "none"
    return [
        f"Adapted from the plan of run {origin.get('run')} for the task "
        f"{json.dumps(origin.get('task'), ensure_ascii=False)} ({how}). Changes: {changes}."
    ]
