"""The plan artifact: its pydantic schema, step references and validation.

A step's arguments may use earlier outputs: ``"$3"`` is step 3's whole output,
``"$3.path"`` a field of it (``"$3.rows.0"`` an item of a list), also inside longer
strings (``"see $3.path"``); ``"$$"`` is a literal dollar sign. A step may only refer
to steps it lists in ``depends_on``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterator
from graphlib import CycleError, TopologicalSorter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planexec.state import PlanDoc, StepDoc, StepRecord
from planexec.storable import UnstorableValueError, to_storable

if TYPE_CHECKING:
    from planexec.tools.registry import ToolRegistry

REFERENCE = re.compile(r"\$\$|\$(\d+)((?:\.[A-Za-z0-9_]+)*)")


class Step(BaseModel):
    """One step of a plan: a single tool call, or a task for the executor model."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1, description="Unique positive integer id of the step.")
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
        '"$N.field" for one field of it, also inside longer strings. Only refer to steps '
        "listed in depends_on.",
    )
    description: str = Field(description="What the step does and why.")
    depends_on: list[int] = Field(
        default_factory=list, description="Ids of the steps that must succeed first."
    )
    expected_output: str = Field(
        default="", description="What the step should produce, to check its result against."
    )


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


def iter_references(value: Any) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Yield ``(step_id, field_path)`` for every reference inside a value."""
    if isinstance(value, str):
        for match in REFERENCE.finditer(value):
            if match.group(1) is not None:
                path = tuple(p for p in match.group(2).split(".") if p)
                yield int(match.group(1)), path
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_references(item)
    elif isinstance(value, list):
        for item in value:
            yield from iter_references(item)


class ReferenceError_(LookupError):  # noqa: N801 - avoid shadowing the builtin
    """A reference names a field or item an output does not have."""


def _select(value: Any, step_id: int, path: tuple[str, ...]) -> Any:
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            where = f"${step_id}" + "".join(f".{p}" for p in path)
            if isinstance(value, dict):
                known = ", ".join(sorted(map(str, value))) or "none"
                raise ReferenceError_(f"{where}: no field {part!r} (fields: {known})")
            raise ReferenceError_(f"{where}: cannot take {part!r} of a {type(value).__name__}")
    return value


def resolve_references(value: Any, outputs: dict[int, Any]) -> Any:
    """Replace references in ``value`` by the outputs they name.

    A string that is exactly one reference becomes the referenced value itself (any type);
    references inside longer strings are replaced by the value's text (JSON for objects).
    """
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value)
        if whole and whole.group(1) is not None:
            step_id = int(whole.group(1))
            return _select(
                outputs[step_id], step_id, tuple(p for p in whole.group(2).split(".") if p)
            )

        def substitute(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return "$"
            step_id = int(match.group(1))
            path = tuple(p for p in match.group(2).split(".") if p)
            found = _select(outputs[step_id], step_id, path)
            return found if isinstance(found, str) else json.dumps(found, default=str)

        return REFERENCE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: resolve_references(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_references(v, outputs) for v in value]
    return value


def _json_clean(data: Any) -> Any:
    """Return the plan as data a checkpoint can store, by :func:`planexec.storable.to_storable`.

    Text is cleaned (NUL and lone surrogates replaced), integers beyond 64 bits become text (so
    validation reports them where a number is expected), NaN becomes null; a value nested too
    deep, or that is not JSON-like at all, makes the plan invalid.
    """
    try:
        return to_storable(data)
    except (UnstorableValueError, TypeError, ValueError, RecursionError) as exc:
        raise PlanValidationError([f"not JSON data: {exc}"]) from None


def _format_pydantic_errors(exc: ValidationError, prefix: str = "") -> list[str]:
    errors = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        errors.append(f"{prefix}{where or 'plan'}: {err['msg']}")
    return errors


def _check_args(step: Step, tools: ToolRegistry) -> list[str]:
    """Check a tool step's arguments against the tool's schema, ignoring referenced values."""
    assert step.tool is not None
    schema = tools.args_schema(step.tool)
    if schema is None:
        return []
    fields = schema.model_fields
    errors = [
        f"step {step.id}: {step.tool} has no argument {name!r} "
        f"(arguments: {', '.join(fields) or 'none'})"
        for name in step.args
        if name not in fields
    ]
    deferred = {name for name, value in step.args.items() if any(iter_references(value))}
    try:
        schema.model_validate({k: v for k, v in step.args.items() if k in fields})
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            if err["loc"] and err["loc"][0] in deferred:
                continue  # known only at run time; the tool validates it then
            where = ".".join(str(p) for p in err["loc"]) or "args"
            errors.append(f"step {step.id}: {step.tool} argument {where}: {err['msg']}")
    return errors


def _check_step_tools(step: Step, tools: ToolRegistry) -> list[str]:
    """Check the tools a step lists: only on a tool-less step, registered, each once."""
    if not step.tools:
        return []
    if step.tool is not None:
        return [
            f"step {step.id}: only a step with no tool may list tools; this step calls "
            f"{step.tool!r} and nothing else"
        ]
    errors: list[str] = []
    seen: set[str] = set()
    for name in step.tools:
        if name in seen:
            errors.append(f"step {step.id}: tool {name!r} is listed twice in tools")
        elif name not in tools:
            errors.append(
                f"step {step.id}: unknown tool {name!r} in tools "
                f"(available: {', '.join(tools.names()) or 'none'})"
            )
        seen.add(name)
    return errors


def validate_plan(
    data: Any,
    tools: ToolRegistry,
    *,
    max_steps: int,
    kept: Collection[int] = (),
) -> Plan:
    """Parse and check a plan; raise ``PlanValidationError`` listing every problem.

    ``kept`` names steps that already succeeded in an earlier revision: they are part of
    the plan but are not run again.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:  # also numbers past the digit limit
            raise PlanValidationError([f"not valid JSON: {exc}"]) from None
    data = _json_clean(data)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanValidationError(_format_pydantic_errors(exc)) from None

    errors: list[str] = []
    if len(plan.steps) > max_steps:
        errors.append(f"plan has {len(plan.steps)} steps; at most {max_steps} are allowed")
    ids = [s.id for s in plan.steps]
    seen: set[int] = set()
    for sid in ids:
        if sid in seen:
            errors.append(f"duplicate step id {sid}")
        seen.add(sid)
    known = set(ids) | set(kept)

    for step in plan.steps:
        if step.tool is not None and step.tool not in tools:
            errors.append(
                f"step {step.id}: unknown tool {step.tool!r} "
                f"(available: {', '.join(tools.names()) or 'none'})"
            )
        elif step.tool is not None:
            errors.extend(_check_args(step, tools))
        errors.extend(_check_step_tools(step, tools))
        for dep in step.depends_on:
            if dep == step.id:
                errors.append(f"step {step.id} depends on itself")
            elif dep not in known:
                errors.append(f"step {step.id} depends on unknown step {dep}")
        for ref, _ in iter_references(step.args):
            if ref not in step.depends_on:
                errors.append(
                    f"step {step.id} refers to ${ref} but does not list step {ref} in depends_on"
                )

    if not errors:
        graph = {s.id: [d for d in s.depends_on if d in set(ids)] for s in plan.steps}
        try:
            tuple(TopologicalSorter(graph).static_order())
        except CycleError as exc:
            cycle = " -> ".join(str(n) for n in exc.args[1])
            errors.append(f"dependency cycle: {cycle}")
    if errors:
        raise PlanValidationError(errors)
    return plan


def to_doc(plan: Plan, version: int) -> PlanDoc:
    """Turn a validated plan into the JSON-native artifact stored in state."""
    steps = [StepDoc(**step.model_dump()) for step in plan.steps]  # type: ignore[typeddict-item]
    return PlanDoc(goal=plan.goal, steps=steps, version=version)


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
    """Return the steps so every step comes after its dependencies, ties in plan order."""
    position = {s["id"]: i for i, s in enumerate(steps)}
    graph = {s["id"]: [d for d in s["depends_on"] if d in position] for s in steps}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    ordered: list[StepDoc] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        for sid in ready:
            ordered.append(steps[position[sid]])
            sorter.done(sid)
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


def current_records(plan: PlanDoc, records: dict[str, StepRecord]) -> dict[str, StepRecord]:
    """Return the step records that still belong to this plan; the others become pending.

    A record counts only if it was made for exactly this step's content and every step it
    depends on counts too (a changed dependency means a changed input).
    """
    current: dict[str, StepRecord] = {}
    valid: set[int] = set()
    try:
        ordered = topological_order(plan["steps"])
    except CycleError:  # an invalid plan edited into state: none of it has run
        return {str(s["id"]): StepRecord(status="pending", attempts=0) for s in plan["steps"]}
    for step in ordered:
        rec = records.get(str(step["id"]))
        finished = rec is not None and rec.get("status", "pending") != "pending"
        if (
            rec is not None
            and finished
            and rec.get("step_digest") == step_digest(step, plan["goal"])
            and all(d in valid for d in step["depends_on"])
        ):
            valid.add(step["id"])
            current[str(step["id"])] = rec
        else:
            current[str(step["id"])] = StepRecord(status="pending", attempts=0)
    return current
