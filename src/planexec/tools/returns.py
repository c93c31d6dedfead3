"""What a tool returns: its declared output schema, and the check of each output it produces.

A tool declares the shape of its output the way it declares its arguments: by the return
annotation of its function (a TypedDict, a pydantic model, a dataclass, or plain types), or
by an explicit schema at registration (``registry.register(tool, output_schema=...)``, a type
or a JSON Schema), or in its metadata (``{"output_schema": {...}}``, as MCP tools bring
theirs). A tool with none (or annotated ``Any``) keeps every output unchecked.

The schema is kept as JSON Schema in the tool's metadata (:data:`OUTPUT_SCHEMA`): one form
for every source, checked by ``jsonschema-rs`` (:func:`check_output`: linear-time regular
expressions, no remote ``$ref`` ever fetched), walked for references by
:mod:`planexec.plan.shapes`. A schema made from a type describes the value as planexec stores
it (:mod:`planexec.storage.storable`): fields by name, not alias; a ``timedelta`` as seconds.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema_rs
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from planexec.errors import ToolError
from planexec.plan.shapes import failure_text, safe_validator

OUTPUT_SCHEMA = "output_schema"
"""Tool metadata key: the JSON Schema of the tool's output (set at registration)."""
MAX_SCHEMA_CHARS = 200_000
"""Largest output schema kept, as JSON text (a bigger one is refused at registration)."""
VALUE_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are data, not schemas (left as they are)."""
NAMED_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose values map names (any names) to schemas."""


class ToolOutputError(ToolError):
    """A tool produced an output that does not have the shape it declared; its step fails."""


class _StoredForm(GenerateJsonSchema):
    """JSON Schema of a type as planexec stores its values: a ``timedelta`` is its seconds."""

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        """Describe a ``timedelta`` as a number of seconds (as it is stored)."""
        return {"type": "number"}


def schema_of_type(annotation: Any) -> dict[str, Any] | None:
    """Return the JSON Schema of a type's values as stored; None for ``Any``/``object``.

    Raises ``TypeError`` when pydantic cannot describe the type.
    """
    if annotation in (Any, object, inspect.Signature.empty):
        return None
    try:
        schema = TypeAdapter(annotation).json_schema(
            mode="serialization", by_alias=False, schema_generator=_StoredForm
        )
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise TypeError(f"no output schema can be made of {annotation!r}: {exc}") from None
    return schema or None


def annotated_schema(tool_: BaseTool) -> dict[str, Any] | None:
    """Return the schema of a tool function's return annotation, if it has a usable one.

    A tool whose return type pydantic cannot describe is left unchecked, with a warning.
    """
    func = _function_of(tool_)
    if func is None or getattr(tool_, "response_format", "content") != "content":
        return None  # a content-and-artifact tool's step keeps the content only
    try:
        annotation = typing.get_type_hints(func).get("return", Any)
    except Exception:  # a forward reference that does not resolve: as if unannotated
        return None
    try:
        schema = schema_of_type(annotation)
        return _checked(schema, tool_.name) if schema is not None else None
    except (TypeError, ValueError) as exc:
        warnings.warn(f"{tool_.name}: output not checked: {exc}", stacklevel=3)
        return None


def _function_of(tool_: BaseTool) -> Callable[..., Any] | None:
    if isinstance(tool_, StructuredTool):
        return tool_.func or tool_.coroutine
    return None


def declared_schema(declared: object, tool_name: str) -> dict[str, Any] | None:
    """Return a declared output schema (a type, or a JSON Schema mapping) as JSON Schema.

    Refuses (``ValueError``) what cannot be checked safely: not a JSON Schema, too big, a
    ``$ref`` outside the schema or to nothing, a pattern the linear-time engine cannot run.
    """
    if declared is None:
        return None
    if isinstance(declared, bool):
        return None if declared else {"not": {}}
    if not isinstance(declared, Mapping):
        try:
            schema = schema_of_type(declared)
        except TypeError as exc:
            raise ValueError(f"{tool_name}: {exc}") from None
        return _checked(schema, tool_name) if schema is not None else None
    try:
        schema = json.loads(json.dumps(declared, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{tool_name}: the output schema is not JSON: {exc}") from None
    return _checked(schema, tool_name) or None


def _checked(schema: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """Return a schema once it is known to be checkable: small, valid, self-contained."""
    text = json.dumps(schema, sort_keys=True)
    if len(text) > MAX_SCHEMA_CHARS:
        raise ValueError(
            f"{tool_name}: the output schema is {len(text)} characters; at most "
            f"{MAX_SCHEMA_CHARS} are kept"
        )
    try:
        _validator(text)
    except ValueError as exc:
        raise ValueError(f"{tool_name}: the output schema cannot be checked: {exc}") from None
    return schema


def output_schema(tool_: BaseTool) -> dict[str, Any] | None:
    """Return the output schema a registered tool carries (None: its outputs are unchecked)."""
    found = (tool_.metadata or {}).get(OUTPUT_SCHEMA)
    return found if isinstance(found, dict) else None


def check_output(tool_: BaseTool, value: Any) -> None:
    """Raise ToolOutputError when ``value`` (stored form) does not fit the tool's output schema.

    The message says where, what was expected and what kind of value came (never the value
    itself: it may be long, or hold a secret). A ``number`` of the schema may be null: a
    stored output keeps NaN and infinities as null.
    """
    schema = output_schema(tool_)
    if schema is None:
        return
    validator = _validator(json.dumps(schema, sort_keys=True))
    if validator.is_valid(value):
        return
    error = next(iter(validator.iter_errors(value)))
    raise ToolOutputError(
        f"{tool_.name} returned an output that does not match its declared output schema: "
        + failure_text(error).replace("the whole value", "the whole output", 1)
    )


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> jsonschema_rs.Validator:
    """Return the safe validator of an output schema, its numbers nullable."""
    return safe_validator(json.dumps(_nullable_numbers(json.loads(schema_text)), sort_keys=True))


def _nullable_numbers(schema: Any) -> Any:
    """Let every ``number`` of a schema be null too (stored outputs hold NaN as null).

    Only schemas are rewritten: values (``const``, ``enum``, ``default``, ``examples``) stay as
    they are, and the names under ``properties`` or ``$defs`` are names, not keywords.
    """
    if isinstance(schema, list):
        return [_nullable_numbers(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in VALUE_KEYWORDS:
            out[key] = value
        elif key in NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _nullable_numbers(sub) for name, sub in value.items()}
        else:
            out[key] = _nullable_numbers(value)
    said = out.get("type")
    if said == "number":
        out["type"] = ["number", "null"]
    elif isinstance(said, list) and "number" in said and "null" not in said:
        out["type"] = [*said, "null"]
    return out
