"""The compact plan format a planner model writes, and how it is written out in full.

A model pays for every token it writes, so the planner writes only what carries information
(:class:`CompactPlan` is the schema of the Plan tool it calls)::

    {"goal": "...", "steps": [
      {"load_csv": "sales.csv"},
      {"clean_data": {"dataset": "$1.dataset"}, "expected_output": "no duplicates"},
      {"description": "Summarise $2 for a manager", "args": {"data": "$2"}},
      {"wait": {"seconds": 1}, "depends_on": [1]}]}

- a tool step is ``{"<tool name>": {<arguments>}}``, or ``{"<tool name>": <value>}`` for a
  tool with one required argument (:meth:`planexec.tools.ToolRegistry.sole_parameter`); a
  step with no such key is done by the executor model (its ``description`` says what to do);
- ``goal`` is optional: a plan without one takes the task's (:func:`planexec.plan.goal_of_task`);
- ids are implied by position (after the steps a revision keeps);
- dependencies are implied by ``$N`` references; ``depends_on`` lists only the others;
- ``description`` and ``expected_output`` are optional on tool steps.

The full format (``"id"``, ``"tool"``, ``"args"``, ...) is accepted as well, step by step.
:func:`expand` writes a compact plan out in full before validation, and
:func:`planexec.plan.validate_plan` fills the derived fields, so what state stores, what the
approval shows and what is hashed is always the complete plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

STEP_FIELDS = frozenset(
    {"id", "tool", "args", "tools", "description", "depends_on", "expected_output", "on_failure"}
)
"""Keys of a step; any other key of a compact step is the name of the tool it calls."""


class CompactPlan(BaseModel):
    """An executable plan: a goal and the steps that reach it, in order."""

    model_config = ConfigDict(title="Plan", extra="forbid")

    goal: str | None = Field(
        default=None, description="The user's goal in one sentence; omit it to use the task's."
    )
    steps: list[dict[str, Any]] = Field(
        min_length=1,
        description='Steps in order; step N is the N-th. A tool step is {"<tool>": {<args>}}, '
        'or {"<tool>": <value>} for a tool with one required argument. '
        'A step with no tool key is done by the executor model: "description" says what '
        'to do, optional "args" and "tools" (tools it may call). "$N" / "$N.field" in args '
        'pass step N\'s output and make the step wait for it; "depends_on": [N] only '
        'where no "$N" does. Optional: "description", "expected_output", "on_failure" '
        '("skip", "ask", or {"retry": N}; default: the plan is revised around a failure).',
    )


SoleParameter = Callable[[str], "str | None"]
"""Names the argument a bare value fills for a tool (None: it has none; KeyError: no such tool)."""


def expand(
    data: Any, first_id: int, sole_parameter: SoleParameter | None = None
) -> tuple[Any, list[str]]:
    """Write a (partly) compact plan out in the full format; return it and its problems.

    Ids implied by position start at ``first_id``. A tool given a bare value gets it as the
    argument ``sole_parameter`` names (without it, the value is kept as written: enough to
    show a step, not to validate it). Data that is not a plan with a list of steps is
    returned as is: validation explains what is wrong with it.
    """
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return data, []
    steps: list[Any] = data["steps"]
    dicts = [s for s in steps if isinstance(s, dict)]
    with_ids = sum(1 for s in dicts if "id" in s)
    errors: list[str] = []
    if 0 < with_ids < len(dicts):
        errors.append("give every step an id, or none (ids are then implied by position)")
    expanded = []
    for position, step in enumerate(steps):
        if not isinstance(step, dict):
            expanded.append(step)
            continue
        full, problem = _expand_step(step, position + 1, sole_parameter)
        if problem:
            errors.append(problem)
        if with_ids == 0:
            full = {"id": first_id + position, **full}
        expanded.append(full)
    return {**data, "steps": expanded}, errors


def _expand_step(
    step: dict[str, Any], position: int, sole_parameter: SoleParameter | None
) -> tuple[dict[str, Any], str | None]:
    """Return one step with its tool and arguments in the full format, or why it cannot be."""
    if "tool" in step:
        return step, None
    named = [k for k in step if k not in STEP_FIELDS]
    if not named:  # a step for the executor model
        return {"tool": None, **step}, None
    if len(named) > 1:
        keys = ", ".join(repr(k) for k in named[:5])
        return step, f"step {position}: name one tool as its key, not several ({keys})"
    tool = named[0]
    if "args" in step:
        return step, f"step {position}: put {tool}'s arguments under its key, not in 'args'"
    rest = {k: v for k, v in step.items() if k != tool}
    args = step[tool]
    if isinstance(args, dict) or sole_parameter is None:
        return {"tool": tool, "args": args, **rest}, None
    try:
        name = sole_parameter(tool)
    except KeyError:  # an unknown tool: validation says so
        return {"tool": tool, **rest}, None
    if name is None:
        return {"tool": tool, **rest}, (
            f"step {position}: give {tool}'s arguments as an object, "
            f'{{"{tool}": {{"<name>": <value>, ...}}}}: a bare value stands only for the one '
            "required argument of a tool that has one"
        )
    return {"tool": tool, "args": {name: args}, **rest}, None
