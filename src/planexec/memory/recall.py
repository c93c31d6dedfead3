"""The planner's memory: a plan for the task from an approved template, or None.

A template of the same shape gives its plan with the new task's values, no model call; a
similar one is adapted by the cheap model (the executor's) in one call, only when that call's
prompt is smaller than the planner's would be (:func:`adaptation` decides, before any call):
it shows the template's plan compactly, with only the tools the plan uses. The plan is
validated like any plan; a miss, a damaged template, an adaptation that would not cost less
or an invalid one returns None and the planner plans as usual. Memory never fails a run.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.store.base import BaseStore
from typing_extensions import TypedDict

from planexec.context import Context
from planexec.drafting import Drafting, drafting
from planexec.llm import prompts
from planexec.memory.store import PlanMemory, Recalled, Template
from planexec.memory.templates import compact_plan, filled, tools_used
from planexec.plan import Plan, PlanValidationError, goal_of_task, validate_plan
from planexec.plan.checks import tool_summary
from planexec.plan.shapes import compact
from planexec.state import State
from planexec.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class PlanOrigin(TypedDict):
    """Where a plan came from when memory made it (shown at the approval)."""

    template: str
    run: str
    task: str
    how: str
    """``same shape`` (values put in, no model call) or ``similar`` (adapted by a model)."""
    changes: list[str]
    """What differs from the template's plan (values, or steps), for the reviewer."""


@dataclass(frozen=True)
class FromMemory:
    """A plan memory made, and where from."""

    plan: Plan
    origin: PlanOrigin


def recall(state: State, ctx: Context, store: BaseStore | None) -> Recalled | None:
    """Find a template for the run's task (None: memory off, no store, a revision, a miss)."""
    if not ctx.plan_memory or store is None or state.get("plan") or state.get("feedback"):
        return None
    try:
        return PlanMemory(store).recall(state["task"])
    except Exception:  # a store that fails or holds damaged data: plan as usual
        log.warning("plan memory lookup failed; planning as usual", exc_info=True)
        return None


def origin_of(found: Recalled, plan: Plan) -> PlanOrigin:
    """Say where a recalled plan came from and what differs from the template's plan."""
    template = found.template
    return PlanOrigin(
        template=found.key,
        run=str(template.get("run")),
        task=str(template.get("task")),
        how=found.how,
        changes=_changes(template, plan, found),
    )


def _changes(template: Template, plan: Plan, found: Recalled) -> list[str]:
    params = [str(p) for p in template.get("params") or []]
    if found.how == "same shape" and found.values is not None:
        pairs = zip(params, found.values, strict=False)
        return [f"{old} → {new}" for old, new in pairs if old != new]
    before = filled(template.get("plan") or {}, params).get("steps") or []
    after = [s.model_dump() for s in plan.steps]
    shown: list[str] = []
    for i in range(max(len(before), len(after))):
        old = before[i] if i < len(before) else None
        new = after[i] if i < len(after) else None
        if old is None and new is not None:
            shown.append(f"+ step {new['id']} ({new['tool'] or 'model'})")
        elif new is None and isinstance(old, dict):
            shown.append(f"- step {i + 1} ({old.get('tool') or 'model'})")
        elif isinstance(old, dict) and new is not None and old.get("args") != new["args"]:
            shown.append(f"step {new['id']} ({new['tool'] or 'model'}): arguments changed")
    return shown


def filled_plan(found: Recalled, tools: ToolRegistry, ctx: Context) -> FromMemory | None:
    """Return the same-shape template's plan with the new values, if it is valid."""
    if found.plan is None:
        return None
    try:
        plan = validate_plan(found.plan, tools, max_steps=ctx.max_steps)
    except (PlanValidationError, TypeError, ValueError):
        return None
    return FromMemory(plan, origin_of(found, plan))


def adaptation(found: Recalled, task: str, tools: ToolRegistry, ctx: Context) -> Drafting | None:
    """Return the cheap model's conversation adapting a similar template, or None.

    The model sees the planner's rules, the template's task and plan in the compact format,
    and only the tools that plan uses, one line each (:func:`tool_lines`). None for a
    template of the same shape (no model call is needed), a damaged one, or one whose
    adaptation prompt is not smaller than the planner's prompt for the task would be (its
    rules, every tool and the task, counted without the workspace's file listing, which only
    makes planning dearer). The one place that decides whether memory asks a model.
    """
    if found.how != "similar":
        return None
    try:
        plan = found.template["plan"]
        shown = json.dumps(
            {"task": found.template.get("task"), "plan": compact_plan(plan)},
            ensure_ascii=False,
            default=str,
        )
        listed = tool_lines(tools, tools_used(plan))
    except Exception:  # a damaged template is no template
        log.warning("plan memory template unreadable; planning as usual", exc_info=True)
        return None
    messages: list[BaseMessage] = [
        SystemMessage(prompts.PLANNER_SYSTEM.format(max_steps=ctx.max_steps, tools=listed)),
        HumanMessage(prompts.ADAPT_TEMPLATE.format(template=shown, task=task)),
    ]
    planning = prompts.PLANNER_SYSTEM.format(max_steps=ctx.max_steps, tools=tools.describe())
    planning += prompts.PLANNER_TASK.format(task=task, files="")
    if sum(len(str(m.content)) for m in messages) >= len(planning):
        log.info("plan memory: adapting would cost more than planning; planning as usual")
        return None
    return drafting(
        messages, tools, max_steps=ctx.max_steps, max_repairs=0, goal=goal_of_task(task)
    )


def tool_lines(tools: ToolRegistry, names: set[str]) -> str:
    """Describe the named tools one line each: what it does, its arguments, what it returns.

    Enough to adapt a plan that already uses them (the planner sees full schemas).
    """
    lines = []
    for name in sorted(n for n in names if n in tools):
        args = tools.args_json_schema(name)
        returns = tools.output_schema(name)
        line = f"- {tool_summary(name, tools)}. Arguments: {compact(args) if args else 'any'}"
        lines.append(line + (f"; returns {compact(returns)}" if returns else ""))
    return "\n".join(lines)
