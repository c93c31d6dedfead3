"""Step references: a step's arguments may use the outputs of the steps it depends on.

The rule, one place for the plan's checks, its dependencies and the executor:

- a whole argument value ``"$3"`` is step 3's output, ``"$3.path"`` a field of it
  (``"$3.rows.0"`` an item of a list); a whole value shaped like an amount (``"$5.00"``,
  two decimals) is text;
- inside longer text, ``${3}`` (or ``${3.path}``) and ``$3.field`` (a field name, not a digit,
  after the dot) are references; a bare ``$3`` is text, so money in text stays money
  (``"costs $5"``, ``"Total: $1,250.00"``, ``"$2.50 each"``);
- ``$$`` is a literal dollar sign everywhere: ``"$$3"`` reaches the tool as ``$3``.

A reference makes its step depend on the step it names (the plan's schema adds it to
``depends_on``; :func:`planexec.plan.validate_plan` checks it); the executor resolves
references just before the step runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_PARTS = r"(?:\.[A-Za-z0-9_]+)*"  # .field or .0 (an item), any number of them
WHOLE = re.compile(rf"\$([1-9][0-9]*)({_PARTS})")
"""A whole argument value that is one reference: ``"$3"``, ``"$3.rows.0"``."""
AMOUNT = re.compile(r"\$[0-9]+\.[0-9][0-9]")
"""A whole value that is an amount (``"$5.00"``), not item 00 of step 5's output."""
IN_TEXT = re.compile(
    rf"\$\$|\$\{{([1-9][0-9]*)({_PARTS})\}}|\$([1-9][0-9]*)(\.[A-Za-z_][A-Za-z0-9_]*{_PARTS})"
)
"""Inside text: ``$$``, ``${3}`` / ``${3.path}``, or ``$3.field`` (a field name first)."""


class UnresolvedReferenceError(LookupError):
    """A reference names a field or item an output does not have."""


def _named(match: re.Match[str]) -> tuple[int, tuple[str, ...]] | None:
    """Return the step and field path a match names (None for ``$$``)."""
    groups = match.groups()
    for number, path in zip(groups[::2], groups[1::2], strict=True):
        if number is not None:
            return int(number), tuple(p for p in path.split(".") if p)
    return None


def _whole(value: str) -> tuple[int, tuple[str, ...]] | None:
    """Return the reference a whole value is (``"$3"``, ``"${3.path}"``), or None."""
    match = WHOLE.fullmatch(value)
    if match is not None and not AMOUNT.fullmatch(value):
        return _named(match)
    match = IN_TEXT.fullmatch(value)
    return _named(match) if match is not None and value.startswith("${") else None


def _in_text(value: str) -> Iterator[re.Match[str]]:
    """Yield the references and ``$$`` escapes inside text (never for a whole amount)."""
    if WHOLE.fullmatch(value) and AMOUNT.fullmatch(value):
        return
    yield from IN_TEXT.finditer(value)


def iter_references(value: Any) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Yield ``(step_id, field_path)`` for every reference inside a value, by the rule above."""
    if isinstance(value, str):
        whole = _whole(value)
        if whole is not None:
            yield whole
            return
        for match in _in_text(value):
            named = _named(match)
            if named is not None:
                yield named
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_references(item)
    elif isinstance(value, list):
        for item in value:
            yield from iter_references(item)


def is_whole_reference(value: Any) -> bool:
    """Say whether a value is exactly one reference (it then stands for the value itself)."""
    return isinstance(value, str) and _whole(value) is not None


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
                raise UnresolvedReferenceError(f"{where}: no field {part!r} (fields: {known})")
            raise UnresolvedReferenceError(
                f"{where}: cannot take {part!r} of a {type(value).__name__}"
            )
    return value


def resolve_references(value: Any, outputs: dict[int, Any]) -> Any:
    """Replace references in ``value`` by the outputs they name.

    A string that is exactly one reference becomes the referenced value itself (any type);
    references inside longer strings are replaced by the value's text (JSON for objects),
    ``$$`` by ``$``; everything else (a bare ``$5`` in text, an amount) is kept as written.
    """
    if isinstance(value, str):
        whole = _whole(value)
        if whole is not None:
            ref, path = whole
            return _select(outputs[ref], ref, path)
        parts, done = [], 0
        for match in _in_text(value):
            parts.append(value[done : match.start()])
            done = match.end()
            named = _named(match)
            if named is None:
                parts.append("$")
                continue
            ref, path = named
            found = _select(outputs[ref], ref, path)
            parts.append(found if isinstance(found, str) else json.dumps(found, default=str))
        return "".join(parts) + value[done:]
    if isinstance(value, dict):
        return {k: resolve_references(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_references(v, outputs) for v in value]
    return value
