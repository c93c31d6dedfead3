"""Step references: a step's arguments may use the outputs of the steps it depends on.

The rule, one place for the plan's checks, its dependencies and the executor:

- ``"$3"`` (step 3's whole output) or ``"$3.path"`` (a field, ``"$3.rows.0"`` an item of a
  list) as a whole argument value is a reference;
- inside longer text, ``$3.field`` (a field name after the dot) is a reference, and a bare
  ``$3`` is one only to an earlier step (3 below the id of the step it is in): ``"costs $5"``
  in step 2 is text;
- an amount is never a reference: ``$`` and digits followed by ``,`` and a digit
  (``$1,250.00``), ``.`` and a digit inside text (``$1.99 each``), or as a whole value
  ``"$5.00"`` (two decimals); nor is ``$0``;
- ``$$`` is a literal dollar sign everywhere: ``"$$3"`` reaches the tool as ``$3``.

A step may only refer to steps it lists in ``depends_on`` (the plan's schema adds them, and
:func:`planexec.plan.validate_plan` checks them); the executor resolves references just
before the step runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

REFERENCE = re.compile(r"\$\$|\$([1-9]\d*)((?:\.[A-Za-z0-9_]+)*)")
"""A whole argument value that is one reference (``"$3"``, ``"$3.rows.0"``), or ``$$``."""
IN_TEXT = re.compile(r"\$\$|\$(\d+)((?:\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)?)")
"""A reference inside text: ``$3``, or ``$3.field`` (a field name first), or ``$$``."""
AMOUNT_GOES_ON = re.compile(r"[.,]\d")
"""What follows the digits of an amount in text: ``$1,250.00``, ``$1.99``."""
WHOLE_AMOUNT = re.compile(r"\$\d+\.\d\d")
"""A whole value that is an amount (``"$5.00"``), not item 00 of step 5's output."""


class UnresolvedReferenceError(LookupError):
    """A reference names a field or item an output does not have."""


def _path(match: re.Match[str]) -> tuple[str, ...]:
    return tuple(p for p in match.group(2).split(".") if p)


def _whole(value: str) -> re.Match[str] | None:
    """Return the reference a whole value is, or None."""
    whole = REFERENCE.fullmatch(value)
    if whole is None or whole.group(1) is None or WHOLE_AMOUNT.fullmatch(value):
        return None
    return whole


def _in_text(value: str, step_id: int | None) -> Iterator[re.Match[str]]:
    """Yield the references and ``$$`` escapes inside text, by the rule above.

    ``step_id`` is the id of the step the text is in (None: a value of no step, where a bare
    ``$N`` may refer to any step).
    """
    for match in IN_TEXT.finditer(value):
        if match.group(1) is None:
            yield match  # $$
            continue
        number = match.group(1)
        if number.startswith("0"):
            continue
        if not match.group(2):  # a bare $N: an amount, or a step after this one, is text
            if AMOUNT_GOES_ON.match(value, match.end()):
                continue
            if step_id is not None and int(number) >= step_id:
                continue
        yield match


def _references(value: str, step_id: int | None) -> Iterator[re.Match[str]]:
    whole = _whole(value)
    if whole is not None:
        yield whole
        return
    yield from (m for m in _in_text(value, step_id) if m.group(1) is not None)


def iter_references(
    value: Any, step_id: int | None = None
) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Yield ``(step_id, field_path)`` for every reference inside a value.

    ``step_id``: the id of the step whose arguments ``value`` is (bare ``$N`` in text refers
    only to an earlier step); None for a value of no step.
    """
    if isinstance(value, str):
        for match in _references(value, step_id):
            yield int(match.group(1)), _path(match)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_references(item, step_id)
    elif isinstance(value, list):
        for item in value:
            yield from iter_references(item, step_id)


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


def resolve_references(value: Any, outputs: dict[int, Any], step_id: int | None = None) -> Any:
    """Replace references in ``value`` by the outputs they name.

    A string that is exactly one reference becomes the referenced value itself (any type);
    references inside longer strings are replaced by the value's text (JSON for objects),
    ``$$`` by ``$``; everything else is kept as written. ``step_id``: as for
    :func:`iter_references`.
    """
    if isinstance(value, str):
        whole = _whole(value)
        if whole is not None:
            ref = int(whole.group(1))
            return _select(outputs[ref], ref, _path(whole))
        parts, done = [], 0
        for match in _in_text(value, step_id):
            parts.append(value[done : match.start()])
            done = match.end()
            if match.group(1) is None:
                parts.append("$")
                continue
            ref = int(match.group(1))
            found = _select(outputs[ref], ref, _path(match))
            parts.append(found if isinstance(found, str) else json.dumps(found, default=str))
        return "".join(parts) + value[done:]
    if isinstance(value, dict):
        return {k: resolve_references(v, outputs, step_id) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_references(v, outputs, step_id) for v in value]
    return value
