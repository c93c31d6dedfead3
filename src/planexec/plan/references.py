"""Step references: a step's arguments may use the outputs of the steps it depends on.

``"$3"`` is step 3's whole output, ``"$3.path"`` a field of it (``"$3.rows.0"`` an item of a
list), also inside longer strings (``"see $3.path"``); ``"$$"`` is a literal dollar sign. A
step may only refer to steps it lists in ``depends_on`` (:func:`planexec.plan.validate_plan`
checks it); the executor resolves references just before the step runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

REFERENCE = re.compile(r"\$\$|\$(\d+)((?:\.[A-Za-z0-9_]+)*)")


class UnresolvedReferenceError(LookupError):
    """A reference names a field or item an output does not have."""


def _path(match: re.Match[str]) -> tuple[str, ...]:
    return tuple(p for p in match.group(2).split(".") if p)


def iter_references(value: Any) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Yield ``(step_id, field_path)`` for every reference inside a value."""
    if isinstance(value, str):
        for match in REFERENCE.finditer(value):
            if match.group(1) is not None:
                yield int(match.group(1)), _path(match)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_references(item)
    elif isinstance(value, list):
        for item in value:
            yield from iter_references(item)


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
    references inside longer strings are replaced by the value's text (JSON for objects).
    """
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value)
        if whole and whole.group(1) is not None:
            step_id = int(whole.group(1))
            return _select(outputs[step_id], step_id, _path(whole))

        def substitute(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return "$"
            step_id = int(match.group(1))
            found = _select(outputs[step_id], step_id, _path(match))
            return found if isinstance(found, str) else json.dumps(found, default=str)

        return REFERENCE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: resolve_references(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_references(v, outputs) for v in value]
    return value
