"""What a tool returns: its declared output schema, and the check of each output it produces.

A tool declares the shape of its output the way it declares its arguments: by the return
annotation of its function (a TypedDict, a pydantic model, a dataclass, or plain types), or
by an explicit schema at registration (``registry.register(tool, output_schema=...)``, a type
or a JSON Schema), or in its metadata (``{"output_schema": {...}}``, as MCP tools bring
theirs). A tool with none (or annotated ``Any``) keeps every output unchecked.

The schema is kept as JSON Schema in the tool's metadata (:data:`OUTPUT_SCHEMA`): one form
for every source, checked by ``jsonschema`` (:func:`check_output`), walked for references by
:mod:`planexec.plan.shapes`.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import best_match
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError

from planexec.errors import ToolError

OUTPUT_SCHEMA = "output_schema"
"""Tool metadata key: the JSON Schema of the tool's output (set at registration)."""
MAX_SCHEMA_CHARS = 200_000
"""Largest output schema kept, as JSON text (a bigger one is refused at registration)."""


class ToolOutputError(ToolError):
    """A tool produced an output that does not have the shape it declared; its step fails."""


def schema_of_type(annotation: Any) -> dict[str, Any] | None:
    """Return the JSON Schema of a type (as serialised output); None for ``Any``/``object``.

    Raises ``TypeError`` when pydantic cannot describe the type.
    """
    if annotation in (Any, object, inspect.Signature.empty):
        return None
    try:
        schema = TypeAdapter(annotation).json_schema(mode="serialization")
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
        return schema_of_type(annotation)
    except TypeError as exc:
        warnings.warn(f"{tool_.name}: output not checked: {exc}", stacklevel=3)
        return None


def _function_of(tool_: BaseTool) -> Callable[..., Any] | None:
    if isinstance(tool_, StructuredTool):
        return tool_.func or tool_.coroutine
    return None


def declared_schema(declared: object, tool_name: str) -> dict[str, Any] | None:
    """Return a declared output schema (a type, or a JSON Schema mapping) as JSON Schema.

    Refuses (``ValueError``) a mapping that is not a valid JSON Schema, or is too big.
    """
    if declared is None:
        return None
    if isinstance(declared, bool):
        return None if declared else {"not": {}}
    if not isinstance(declared, Mapping):
        try:
            return schema_of_type(declared)
        except TypeError as exc:
            raise ValueError(f"{tool_name}: {exc}") from None
    try:
        text = json.dumps(declared, allow_nan=False)
        schema = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{tool_name}: the output schema is not JSON: {exc}") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise ValueError(
            f"{tool_name}: the output schema is {len(text)} characters; at most "
            f"{MAX_SCHEMA_CHARS} are kept"
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{tool_name}: not a JSON Schema: {exc.message[:300]}") from None
    return typing.cast(dict[str, Any], schema) or None


def output_schema(tool_: BaseTool) -> dict[str, Any] | None:
    """Return the output schema a registered tool carries (None: its outputs are unchecked)."""
    found = (tool_.metadata or {}).get(OUTPUT_SCHEMA)
    return found if isinstance(found, dict) else None


def check_output(tool_: BaseTool, value: Any) -> None:
    """Raise ToolOutputError when ``value`` (stored form) does not fit the tool's output schema.

    The message says where, what was expected and what came. A number of the schema may be
    null: a stored output keeps NaN and infinities as null.
    """
    schema = output_schema(tool_)
    if schema is None:
        return
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = best_match(validator.iter_errors(value))
    if error is None:
        return
    where = ".".join(map(str, error.absolute_path)) or "the whole output"
    said = " ".join(error.message.split())
    said = said if len(said) <= 300 else said[:299] + "…"
    raise ToolOutputError(
        f"{tool_.name} returned an output that does not match its declared output schema: "
        f"at {where}: {said}"
    )


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    return Draft202012Validator(_nullable_numbers(json.loads(schema_text)))


def _nullable_numbers(schema: Any) -> Any:
    """Let every ``number`` of a schema be null too (stored outputs hold NaN as null)."""
    if isinstance(schema, list):
        return [_nullable_numbers(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _nullable_numbers(v) for k, v in schema.items()}
    said = out.get("type")
    if said == "number":
        out["type"] = ["number", "null"]
    elif isinstance(said, list) and "number" in said and "null" not in said:
        out["type"] = [*said, "null"]
    return out
