"""Shapes of step outputs, as JSON Schema: what a reference reaches, its types, a compact line.

A tool may declare the shape of its output as a JSON Schema
(:mod:`planexec.tools.returns` makes one from a return annotation or takes it as given). Three
questions are asked of it, all here:

* what does a reference's path (``$3.rows.0.name``) reach: :func:`reach`, which names the
  fields that exist when the path cannot be followed;
* which JSON types can a value of a schema have: :func:`json_types` (with :func:`fits`);
* how to show it to a planner or a reviewer in a line: :func:`compact`;

and values are checked against one (a tool's arguments, its outputs) by :func:`safe_validator`.

Every answer errs towards "it may": a reference is refused only when no value the schema
allows can have the path (a union may, ``{}`` may, an open object may), and a type only when
the two sets of types cannot meet (integers are numbers; a number may be an integer).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

Schema = Mapping[str, Any] | bool
"""A JSON Schema: an object, or ``true`` (anything) / ``false`` (nothing)."""

JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
MAX_HOPS = 64
"""Most ``$ref`` and union levels followed at one place (a schema may refer to itself)."""
MAX_VISITS = 2048
"""Most schema nodes looked at for one place (a huge or looping schema costs bounded time)."""
ALTERNATIVES = ("anyOf", "oneOf", "allOf", "if", "then", "else")
"""Keywords whose schemas a value may (also) have to match."""
COMPACT_DEPTH = 3
COMPACT_FIELDS = 24
COMPACT_LIMIT = 600
"""Nesting, fields per object and characters of a compact line."""


class ShapeError(LookupError):
    """A path that no value of the schema can have; the message says why."""


@dataclass(frozen=True)
class Shapes:
    """The branches a value may take at one place of a schema (empty: it cannot be there).

    ``anything`` is true when one branch allows any value (nothing more can be known).
    """

    branches: tuple[Mapping[str, Any], ...]
    anything: bool


def _pointer(root: Mapping[str, Any], ref: str) -> Schema:
    """Return what a local ``$ref`` (``#/$defs/Row``) points to; ``true`` if it cannot be found."""
    if not ref.startswith("#"):
        return True  # a remote schema: not fetched, so anything
    found: Any = root
    for raw in filter(None, ref[1:].split("/")):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(found, Mapping) and part in found:
            found = found[part]
        elif isinstance(found, list) and (index := _index(part)) is not None and index < len(found):
            found = found[index]
        else:
            return True
    return found if isinstance(found, Mapping | bool) else True


def _index(part: str) -> int | None:
    """Return a list index written in ASCII digits (None for anything else)."""
    return int(part) if part.isascii() and part.isdigit() else None


def expand(schema: Schema, root: Mapping[str, Any]) -> Shapes:
    """Follow ``$ref``, ``anyOf``, ``oneOf``, ``allOf`` and conditionals down to plain branches.

    Every alternative counts as a branch, and so do a node's own keywords beside them
    (``allOf`` and ``if``/``then`` only ever narrow: a shape here errs towards "it may"). Each
    node is visited once, and at most :data:`MAX_VISITS` in all: past that, anything.
    """
    branches: list[Mapping[str, Any]] = []
    anything = False
    seen: set[int] = set()
    pending: list[tuple[Schema, int]] = [(schema, 0)]
    visits = 0
    while pending:
        item, hops = pending.pop()
        visits += 1
        if visits > MAX_VISITS:
            anything = True
            break
        if item is True or hops > MAX_HOPS:
            anything = True
            continue
        if not isinstance(item, Mapping) or id(item) in seen:  # false, or a node seen already
            continue
        seen.add(id(item))
        alternatives = _alternatives(item, root)
        pending.extend((sub, hops + 1) for sub in alternatives)
        if _types_of(item) or item.get("enum") or "const" in item:
            branches.append(item)
        elif not alternatives:
            anything = True  # {} or only annotations: any value
    return Shapes(tuple(reversed(branches)), anything)


def _alternatives(item: Mapping[str, Any], root: Mapping[str, Any]) -> list[Schema]:
    """Return the schemas a node refers to or combines (``$ref``, ``anyOf``, ``if``, …)."""
    found: list[Any] = []
    for key in ALTERNATIVES:
        value = item.get(key)
        found.extend(value if isinstance(value, list) else [value] if key in item else [])
    dependent = item.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        found.extend(dependent.values())
    if isinstance(ref := item.get("$ref"), str):
        found.append(_pointer(root, ref))
    return [sub for sub in found if isinstance(sub, Mapping | bool)]


def _types_of(branch: Mapping[str, Any]) -> frozenset[str]:
    """Return the JSON types a plain branch names or implies (empty: not said)."""
    said = branch.get("type")
    if isinstance(said, str):
        return frozenset({said}) & JSON_TYPES
    if isinstance(said, list):
        return frozenset(t for t in said if isinstance(t, str)) & JSON_TYPES
    if "const" in branch:
        return frozenset({_type_of_value(branch["const"])})
    if isinstance(branch.get("enum"), list):
        return frozenset(_type_of_value(v) for v in branch["enum"])
    implied = set()
    if any(k in branch for k in ("properties", "additionalProperties", "patternProperties")):
        implied.add("object")
    if any(k in branch for k in ("items", "prefixItems")):
        implied.add("array")
    return frozenset(implied)


def _type_of_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _field(branch: Mapping[str, Any], part: str) -> Schema | None:
    """Return the schema of field ``part`` of an object branch (None: it has no such field).

    An object that lists its properties and says nothing of others is taken to have those
    (as a TypedDict, a pydantic model or a dataclass declares them).
    """
    properties = branch.get("properties")
    if isinstance(properties, Mapping) and part in properties:
        found = properties[part]
        return found if isinstance(found, Mapping | bool) else True
    patterns = branch.get("patternProperties")
    if isinstance(patterns, Mapping) and patterns:  # not matched (a pattern may be slow)
        return {"anyOf": [p for p in patterns.values() if isinstance(p, Mapping | bool)]}
    extra = branch.get("additionalProperties")
    if extra is None:
        return None if isinstance(properties, Mapping) or isinstance(patterns, Mapping) else True
    if extra is False:
        return None
    return extra if isinstance(extra, Mapping | bool) else True


def _item(branch: Mapping[str, Any], part: str) -> Schema | None:
    """Return the schema of item ``part`` of an array branch (None: it has no such item)."""
    index = _index(part)
    if index is None:
        return None
    prefix = branch.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        found = prefix[index]
        return found if isinstance(found, Mapping | bool) else True
    items = branch.get("items", True)
    if isinstance(prefix, list) and items is False:
        return None
    max_items = branch.get("maxItems")
    if isinstance(max_items, int) and index >= max_items:
        return None
    return items if isinstance(items, Mapping | bool) else True


def field_names(shapes: Shapes) -> list[str]:
    """Return the fields the object branches list, in order, each once."""
    names: dict[str, None] = {}
    for branch in shapes.branches:
        properties = branch.get("properties")
        if isinstance(properties, Mapping):
            names.update(dict.fromkeys(map(str, properties)))
    return list(names)


def _step(shapes: Shapes, part: str, root: Mapping[str, Any]) -> tuple[Shapes, str | None]:
    """Take ``part`` of a value of these shapes: the shapes reached, or why it cannot be."""
    reached: list[Schema] = []
    kinds: set[str] = set()
    for branch in shapes.branches:
        types = _types_of(branch)
        kinds |= types
        found = None
        if "object" in types:
            found = _field(branch, part)
        if found is None and "array" in types:
            found = _item(branch, part)
        if found is not None:
            reached.append(found)
    if shapes.anything:
        reached.append(True)
    if reached:
        merged = expand({"anyOf": list(reached)}, root)
        return merged, None
    names = field_names(shapes)
    if names:
        shown = ", ".join(names[:COMPACT_FIELDS]) + (", …" if len(names) > COMPACT_FIELDS else "")
        return shapes, f"no field {part!r} (fields: {shown})"
    if "array" in kinds and _index(part) is not None:
        return shapes, f"no item {part} (its list is shorter)"
    if "array" in kinds:
        return shapes, f"{part!r} is not an item of its list (use a number: .0, .1, …)"
    shown = " or ".join(sorted(kinds - {"null"})) or "null"
    return shapes, f"cannot take {part!r} of a {shown}"


def reach(schema: Schema, path: tuple[str, ...]) -> Shapes:
    """Return the shapes ``path`` reaches in values of ``schema``; raise ShapeError if none can.

    The error says where the path stops and what exists there.
    """
    root = schema if isinstance(schema, Mapping) else {}
    shapes = expand(schema, root)
    for depth, part in enumerate(path):
        shapes, problem = _step(shapes, part, root)
        if problem is not None:
            at = ".".join(path[:depth])
            raise ShapeError(f"{problem}" + (f" at .{at}" if at else ""))
    return shapes


def json_types(shapes: Shapes) -> frozenset[str] | None:
    """Return the JSON types a value of these shapes may have (None: any type may be)."""
    if shapes.anything:
        return None
    found: set[str] = set()
    for branch in shapes.branches:
        types = _types_of(branch)
        if not types:
            return None
        found |= types
    return frozenset(found)


def fits(given: frozenset[str] | None, wanted: frozenset[str] | None) -> bool:
    """Say whether a value of types ``given`` may fill a place of types ``wanted``.

    Unknown (None) fits anything; integers and numbers fit each other.
    """
    if given is None or wanted is None:
        return True

    def widen(types: frozenset[str]) -> set[str]:
        return {"number" if t == "integer" else t for t in types}

    return bool(widen(given) & widen(wanted))


def type_text(types: frozenset[str] | None) -> str:
    """Name a set of JSON types for a message (``string or null``)."""
    return "any type" if types is None else " or ".join(sorted(types)) or "nothing"


def compact(schema: Schema, *, limit: int = COMPACT_LIMIT) -> str:
    """Show a schema in one short line: ``{path: string, rows: integer, unit?: string}``.

    ``?`` marks a field that may be missing, ``[T]`` a list of T, ``{<key>: T}`` a mapping;
    deeper levels show as ``{…}``. Field names are shown as JSON strings when they are not
    plain names, so a schema cannot add lines to a prompt.
    """
    root = schema if isinstance(schema, Mapping) else {}
    text = _compact(schema, root, 0)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _name(field: str) -> str:
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", field)
    return field if plain else json.dumps(field[:40], ensure_ascii=False)


def _compact(schema: Schema, root: Mapping[str, Any], depth: int) -> str:
    shapes = expand(schema, root)
    if shapes.anything:
        return "any"
    shown = list(dict.fromkeys(_branch_text(b, root, depth) for b in shapes.branches))
    if len(shown) > 6:
        shown = [*shown[:6], "…"]
    return "|".join(shown) or "never"


def _branch_text(branch: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    if "const" in branch:
        return json.dumps(branch["const"], ensure_ascii=False, default=str)[:40]
    if isinstance(branch.get("enum"), list):
        values = [json.dumps(v, ensure_ascii=False, default=str)[:40] for v in branch["enum"][:6]]
        return "|".join(values) + ("|…" if len(branch["enum"]) > 6 else "")
    parts = [_kind_text(kind, branch, root, depth) for kind in sorted(_types_of(branch))]
    return "|".join(parts)


def _kind_text(kind: str, branch: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    if kind == "object":
        return _object_text(branch, root, depth)
    if kind == "array":
        if depth >= COMPACT_DEPTH:
            return "[…]"
        prefix = branch.get("prefixItems")
        if isinstance(prefix, list) and prefix:
            inner = ", ".join(_compact(p, root, depth + 1) for p in prefix[:6])
            return f"[{inner}]"
        items = branch.get("items", True)
        inner = _compact(items if isinstance(items, Mapping | bool) else True, root, depth + 1)
        return f"[{inner}]"
    return kind


def _object_text(branch: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    properties = branch.get("properties")
    extra = branch.get("additionalProperties")
    if depth >= COMPACT_DEPTH:
        return "{…}"
    fields: list[str] = []
    if isinstance(properties, Mapping):
        required = branch.get("required")
        needed = set(required) if isinstance(required, list) else set()
        for name, sub in list(properties.items())[:COMPACT_FIELDS]:
            mark = "" if name in needed else "?"
            inner = _compact(sub if isinstance(sub, Mapping | bool) else True, root, depth + 1)
            fields.append(f"{_name(str(name))}{mark}: {inner}")
        if len(properties) > COMPACT_FIELDS:
            fields.append("…")
    if isinstance(extra, Mapping) or (extra is True and not fields):
        fields.append(f"<key>: {_compact(extra, root, depth + 1)}")
    elif not fields:
        return "object"
    return "{" + ", ".join(fields) + "}"


@functools.lru_cache(maxsize=512)
def safe_validator(schema_text: str) -> jsonschema_rs.Validator:
    """Return a validator of a JSON Schema (given as JSON text) that is safe to run on anything.

    The draft is the one its ``$schema`` names (2020-12 when it names none; draft 4, 6, 7
    and 2019-09 too, from bundled meta-schemas). Its regular expressions run in linear time
    and nothing is ever fetched: neither a remote ``$ref`` nor a remote ``$schema``. Raises
    ``ValueError`` when the schema cannot be checked so: not JSON Schema of its draft, a
    reference outside itself or to nothing, a pattern the linear-time engine cannot run.
    """

    def not_fetched(uri: str) -> Any:
        raise ValueError(f"a $ref outside the schema is not fetched ({uri[:100]})")

    try:
        return jsonschema_rs.validator_for(
            json.loads(schema_text),
            retriever=not_fetched,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except Exception as exc:  # jsonschema-rs raises ValidationError, ReferencingError, ...
        first = " ".join(str(exc).split("\n")[0].split())[:200]
        raise ValueError(first) from None


LIMIT_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    }
)
"""Keywords whose detail is a number of the schema's own (safe to show)."""


def failure_text(error: Any) -> str:
    """Say where a value failed its schema and what the schema wanted, never the value.

    ``error`` is a jsonschema-rs ``ValidationError``. A value (or an object's keys) may be
    long, or hold a secret: the message names the place, the keyword and, for a type, a
    required field or a limit, what the schema itself says, and the kind of value that came.
    """
    where = ".".join(map(str, error.instance_path)) or "the whole value"
    kind = error.kind
    name = str(getattr(kind, "name", "")) or "schema"
    detail: dict[str, Any] = getattr(kind, "as_dict", dict)()
    if name == "required":
        wanted = f"the required field {json.dumps(detail.get('property'))[:80]} is missing"
    elif name == "type":
        wanted = "expected " + " or ".join(map(str, detail.get("types", [])))[:80]
    elif name in LIMIT_KEYWORDS and isinstance(detail.get("limit"), int | float):
        wanted = f"{name} {detail['limit']}"
    else:
        wanted = f"does not satisfy {name}"
    return f"at {where}: {wanted}; got {kind_of(error.instance)}"


def kind_of(value: object) -> str:
    """Describe a value by its kind and size, not its content."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return f"a string ({len(value)} characters)"
    if isinstance(value, list):
        return f"a list ({len(value)} items)"
    if isinstance(value, dict):
        return f"an object ({len(value)} fields)"
    return type(value).__name__
