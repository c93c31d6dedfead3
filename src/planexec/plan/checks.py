"""Checks of one proposed step: its tool and arguments, the tools it lists, what it refers to.

A tool-less step needs a description (it is the executor model's instructions); a tool step
without one is described by :func:`tool_summary`.

:func:`planexec.plan.validate_plan` runs them on every step and reports every problem found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from planexec.plan.references import is_whole_reference, iter_references
from planexec.plan.shapes import (
    ShapeError,
    Shapes,
    expand,
    failure_text,
    fits,
    json_types,
    reach,
    safe_validator,
    type_text,
)

if TYPE_CHECKING:
    from planexec.plan import Step
    from planexec.tools.registry import ToolRegistry


def check_step(
    step: Step, tools: ToolRegistry, known: set[int], producers: Mapping[int, str | None]
) -> list[str]:
    """Return the problems of one step (``known``: the ids it may depend on).

    ``producers`` gives the tool of each step of the plan (None: the executor model), whose
    declared output the step's references are checked against (:func:`check_references`).
    """
    errors: list[str] = []
    if step.tool is not None and step.tool not in tools:
        errors.append(
            f"step {step.id}: unknown tool {step.tool!r} "
            f"(available: {', '.join(tools.names()) or 'none'})"
        )
    elif step.tool is not None:
        errors.extend(_check_args(step, step.tool, tools))
    elif not step.description.strip():
        errors.append(
            f"step {step.id}: a step with no tool needs a description (the executor "
            "model's instructions)"
        )
    errors.extend(_check_step_tools(step, tools))
    refs = {ref for ref, _ in iter_references(step.args)}
    for dep in step.depends_on:
        if dep == step.id:
            errors.append(f"step {step.id} depends on itself")
        elif dep in refs and dep not in known:
            errors.append(f"step {step.id} refers to ${dep}, but there is no step {dep}")
        elif dep not in known:
            errors.append(f"step {step.id} depends on unknown step {dep}")
    for ref in sorted(refs - set(step.depends_on)):  # beyond 64 bits: never a step id
        errors.append(f"step {step.id} refers to ${ref}, but there is no step {ref}")
    errors.extend(check_references(step, tools, producers))
    return errors


def check_references(
    step: Step, tools: ToolRegistry, producers: Mapping[int, str | None]
) -> list[str]:
    """Check each ``$N.field`` against what step N's tool declares it returns.

    A path no output of that tool can have is refused, naming the fields that exist; so is a
    reference whose types cannot fill the argument it fills (a whole ``"$N.field"``, or text
    around a reference: a string), when both are declared. A step whose tool declares no
    output (or the executor model's step) is not checked.
    """
    errors: dict[str, None] = {}  # each problem once, however often an argument repeats it
    places = _argument_places(step, tools)
    for name, value in step.args.items():
        for ref, path in iter_references(value):
            producer = producers.get(ref)
            schema = tools.output_schema(producer) if producer in tools else None
            if schema is None:
                continue
            where = f"${ref}" + "".join(f".{p}" for p in path)
            try:
                reached = reach(schema, path)
            except ShapeError as exc:
                problem = (
                    f"{where} does not exist: {exc} in what step {ref}'s tool {producer} returns"
                )
                errors[f"step {step.id}: {problem}"] = None
                continue
            wanted = places.get(name)
            if wanted is None or not isinstance(value, str):
                continue
            whole = is_whole_reference(value)
            given = json_types(reached) if whole else frozenset({"string"})
            if not fits(given, json_types(wanted)):
                said = where if whole else repr(value)
                wants = type_text(json_types(wanted))
                errors[
                    f"step {step.id}: argument {name!r} of {step.tool} takes {wants}, but {said} "
                    f"is {type_text(given)}"
                ] = None
    return list(errors)


def _argument_places(step: Step, tools: ToolRegistry) -> dict[str, Shapes]:
    """Return the shapes each argument of a tool step's tool takes (none: not declared)."""
    if step.tool is None or step.tool not in tools:
        return {}
    schema = tools.args_json_schema(step.tool)
    properties = schema.get("properties") if schema is not None else None
    if not isinstance(properties, Mapping):
        return {}
    assert schema is not None
    return {str(name): expand(sub, schema) for name, sub in properties.items()}


def tool_summary(tool: str, tools: ToolRegistry, limit: int = 160) -> str:
    """Describe a tool step that has no description: its tool and what the tool does."""
    about = " ".join((tools.get(tool).description or "").split())
    first = about.split(". ")[0].rstrip(".")
    text = f"{tool}: {first}" if first else tool
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_args(step: Step, tool: str, tools: ToolRegistry) -> list[str]:
    """Check a tool step's arguments against its tool's schema, ignoring referenced values."""
    schema = tools.args_schema(tool)
    if schema is None:
        return _check_json_args(step, tools.args_json_schema(tool))
    fields = schema.model_fields
    errors = _unknown_arguments(step, list(fields))
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


def _unknown_arguments(step: Step, names: list[str]) -> list[str]:
    """Name each argument of a step its tool does not take (``names``: those it takes)."""
    known = ", ".join(names) or "none"
    return [
        f"step {step.id}: {step.tool} has no argument {name!r} (arguments: {known})"
        for name in step.args
        if name not in names
    ]


def _check_json_args(step: Step, schema: dict[str, Any] | None) -> list[str]:
    """Check arguments against a JSON Schema (an MCP tool's), ignoring referenced values.

    Names the schema does not list are refused when it lists some (as for a pydantic schema);
    a schema that cannot be checked safely (:func:`~planexec.plan.shapes.safe_validator`)
    leaves the arguments to the tool.
    """
    properties = schema.get("properties") if schema is not None else None
    if schema is None or not isinstance(properties, dict):
        return []
    closed = schema.get("additionalProperties") in (None, False)
    errors = _unknown_arguments(step, list(map(str, properties))) if closed else []
    deferred = {name for name, value in step.args.items() if any(iter_references(value))}
    if deferred:  # what keys are present is known only at run time: each argument alone
        required = [r for r in schema.get("required") or [] if r not in deferred]
        shared: dict[str, Any] = {
            k: schema[k] for k in ("$schema", "$defs", "definitions") if k in schema
        }
        schema = {**shared, "type": "object", "properties": properties, "required": required}
    try:
        validator = safe_validator(json.dumps(schema, sort_keys=True))
    except ValueError:
        return errors  # the tool checks them when it runs
    given = {k: v for k, v in step.args.items() if k not in deferred and k in properties}
    for error in validator.iter_errors(given):
        said = failure_text(error).replace("the whole value", "its arguments", 1)
        errors.append(f"step {step.id}: {step.tool}: {said}")
        if len(errors) >= 10:
            break
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
