"""The plan a planner, reviewer or editor proposes: its pydantic schema and its validation.

:func:`validate_plan` checks a proposed plan against the registered tools (each step with
:mod:`planexec.plan.checks`); :func:`to_doc` makes the JSON-native
:class:`~planexec.state.PlanDoc` that state keeps (see :mod:`planexec.plan.doc`). Step
references (``"$3.path"``) are described in :mod:`planexec.plan.references`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from graphlib import CycleError, TopologicalSorter
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planexec.plan.checks import check_step, tool_summary
from planexec.plan.compact import STEP_FIELDS, SoleParameter, expand
from planexec.plan.references import iter_references
from planexec.redaction.secrets import scrub_text
from planexec.state import PlanDoc, StepDoc
from planexec.storage.storable import INT_MAX, INT_MIN, UnstorableValueError, to_storable

if TYPE_CHECKING:
    from planexec.tools.registry import ToolRegistry


StepId = Annotated[int, Field(ge=1, le=INT_MAX)]
"""A step id: a positive integer a checkpoint can store (64 bits)."""
MAX_STEP_RETRIES = 5
"""Most extra attempts ``on_failure: {"retry": N}`` may ask for."""


class RetryOnFailure(BaseModel):
    """``{"retry": N}``: attempt a failed step N more times, whatever its error."""

    model_config = ConfigDict(extra="forbid")

    retry: int = Field(ge=1, le=MAX_STEP_RETRIES, description="Extra attempts (1-5).")


OnFailure = Literal["replan", "skip", "ask"] | RetryOnFailure
"""What a step's failure leads to (see :attr:`Step.on_failure`)."""


LEFT_OUT_WHEN_NULL = frozenset({"tools", "args", "description", "depends_on", "expected_output"})
"""Optional step fields whose ``null`` means left out (``tool: null`` means the executor model)."""


class Step(BaseModel):
    """One step of a plan: a single tool call, or a task for the executor model."""

    model_config = ConfigDict(extra="forbid")

    id: StepId = Field(description="Unique positive integer id of the step.")
    tool: str | None = Field(
        description="Name of one available tool, or null for a step the executor model "
        "does itself (writing, summarising)."
    )
    tools: list[str] = Field(
        default_factory=list,
        description='Only on a "tool": null step: the tools its executor model may call '
        "(default none).",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description='Arguments of the tool. "$N" stands for step N\'s whole output and '
        '"$N.field" for one field of it, also inside longer strings; step N is then a '
        "dependency.",
    )
    description: str = Field(
        default="",
        description="What the step does and why (a tool step without one is described by "
        "its tool).",
    )
    depends_on: list[StepId] = Field(
        default_factory=list,
        description="Ids of the steps that must succeed first (the steps its arguments refer "
        "to are added).",
    )
    expected_output: str = Field(
        default="", description="What the step should produce, to check its result against."
    )
    on_failure: OnFailure | None = Field(
        default=None,
        description='When the step fails for good: "replan" (the default: the plan is revised '
        'around it), "skip" (the steps that use its output are skipped, the others go on), '
        '"ask" (a human decides: retry, skip, replan or cancel), or {"retry": N} (N more '
        "attempts, 1-5, whatever the error).",
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_left_out(cls, data: Any) -> Any:
        """Read ``null`` for an optional field as the field left out (models write both)."""
        if isinstance(data, dict) and any(data.get(k, 0) is None for k in LEFT_OUT_WHEN_NULL):
            return {k: v for k, v in data.items() if not (v is None and k in LEFT_OUT_WHEN_NULL)}
        return data

    @model_validator(mode="after")
    def _referenced_steps_are_dependencies(self) -> Step:
        """Add the steps the arguments refer to (``$N``) to ``depends_on``.

        A step whose dependencies already name every referenced step keeps them as given
        (its content, hence its digest, does not change); otherwise they become sorted.
        """
        refs = {ref for ref, _ in iter_references(self.args) if 1 <= ref <= INT_MAX}
        if not refs <= set(self.depends_on):
            self.depends_on = sorted(refs | set(self.depends_on))
        return self


class Plan(BaseModel):
    """An executable plan: a goal and the steps that reach it."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(description="The user's goal in one sentence.")
    steps: list[Step] = Field(min_length=1, description="The steps, in dependency order.")


class PlanValidationError(ValueError):
    """A plan failed validation; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str]) -> None:
        """Keep the list of problems and make a readable message of them."""
        self.errors = errors
        super().__init__("invalid plan: " + "; ".join(errors))


def goal_of_task(task: str, limit: int = 200) -> str:
    """Return the goal of a plan that states none: the task's first line, at most ``limit``.

    Secrets are scrubbed before the line is cut (a cut must not leave part of one behind).
    """
    line = next((" ".join(ln.split()) for ln in task.splitlines() if ln.strip()), "")
    line = scrub_text(line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _huge_integers(data: Any) -> list[str]:
    """Name each step whose arguments hold an integer beyond 64 bits.

    State would keep it as text, which a tool's number argument would read back as the number.
    (An id or a dependency that large is refused by the plan's schema.)
    """
    steps = data.get("steps") if isinstance(data, dict) else None
    found: list[str] = []
    for position, step in enumerate(steps if isinstance(steps, list) else [], start=1):
        if not isinstance(step, dict):
            continue
        pending = [v for k, v in step.items() if k == "args" or k not in STEP_FIELDS]
        seen = 0
        while pending and seen < 100_000:
            value, seen = pending.pop(), seen + 1
            if isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, list):
                pending.extend(value)
            elif type(value) is int and not INT_MIN <= value <= INT_MAX:
                found.append(
                    f"step {position}: an integer beyond 64 bits is not a number a tool takes "
                    "(give it as text if it is an identifier)"
                )
                break
    return found


def _parse(
    data: Any,
    first_id: int = 1,
    sole_parameter: SoleParameter | None = None,
    goal: str | None = None,
) -> Plan:
    """Read a plan from JSON text or from storable data.

    Storable: made by :func:`planexec.storage.storable.to_storable`.

    Text is cleaned (NUL and lone surrogates replaced), integers beyond 64 bits become text (so
    validation reports them where a number is expected), NaN becomes null; a value nested too
    deep, or that is not JSON-like at all, makes the plan invalid. Compact steps are written
    out in full, ids implied by position starting at ``first_id``; a plan that states no goal
    gets ``goal`` (when given).
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:  # also numbers past the digit limit
            raise PlanValidationError([f"not valid JSON: {exc}"]) from None
    if huge := _huge_integers(data):
        raise PlanValidationError(huge)
    try:
        data = to_storable(data)
    except (UnstorableValueError, TypeError, ValueError, RecursionError) as exc:
        raise PlanValidationError([f"not JSON data: {exc}"]) from None
    if goal is not None and isinstance(data, dict) and data.get("goal") is None:
        data = {**data, "goal": goal}
    data, problems = expand(data, first_id, sole_parameter)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems += [f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in errors]
        raise PlanValidationError(problems) from None
    if problems:
        raise PlanValidationError(problems)
    return plan


def validate_plan(
    data: Any,
    tools: ToolRegistry,
    *,
    max_steps: int,
    kept: Collection[int] | Mapping[int, str | None] = (),
    goal: str | None = None,
) -> Plan:
    """Parse and check a plan; raise ``PlanValidationError`` listing every problem.

    ``kept`` names steps that already succeeded in an earlier revision: they are part of
    the plan but are not run again, and ids implied by position start after them. Given as
    a mapping to their tools, references to them are checked against what those tools
    declare they return, as references within the plan are. ``goal``
    is the goal of a plan that states none (the task's, :func:`goal_of_task`). The plan
    returned is complete: a tool step without a description gets its tool's.
    """
    plan = _parse(data, max(kept, default=0) + 1, tools.sole_parameter, goal)
    errors: list[str] = []
    if len(plan.steps) > max_steps:
        errors.append(f"plan has {len(plan.steps)} steps; at most {max_steps} are allowed")
    ids = [s.id for s in plan.steps]
    seen: set[int] = set()
    for sid in ids:
        if sid in seen:
            errors.append(f"duplicate step id {sid}")
        seen.add(sid)
    known = set(ids) | set(kept)  # built once: per step it made validation O(n²)
    producers = dict(kept) if isinstance(kept, Mapping) else {}
    producers.update((s.id, s.tool) for s in plan.steps)
    for step in plan.steps:
        errors.extend(check_step(step, tools, known, producers))
    if not errors:
        graph = {s.id: [d for d in s.depends_on if d in seen] for s in plan.steps}
        try:
            tuple(TopologicalSorter(graph).static_order())
        except CycleError as exc:
            errors.append(f"dependency cycle: {' -> '.join(str(n) for n in exc.args[1])}")
    if errors:
        raise PlanValidationError(errors)
    for step in plan.steps:
        if step.tool is not None and not step.description.strip():
            step.description = tool_summary(step.tool, tools)
    return plan


def to_doc(plan: Plan, version: int) -> PlanDoc:
    """Turn a validated plan into the JSON-native artifact stored in state."""
    steps = [_step_doc(step) for step in plan.steps]
    return PlanDoc(goal=plan.goal, steps=steps, version=version)


def _step_doc(step: Step) -> StepDoc:
    """Return a step as state stores it: ``on_failure`` only when given.

    A plan without any keeps the content, hence the digest, it had before the field existed.
    """
    data = step.model_dump()
    if data["on_failure"] is None:
        del data["on_failure"]
    return cast(StepDoc, data)
