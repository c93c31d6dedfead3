"""Edit a plan's JSON in $VISUAL/$EDITOR; a mistake reopens the editor on the user's own text."""

from __future__ import annotations

import json
from typing import Any

import click

from planexec.state import PlanDoc

COMMENT = "//"
HELP = "// Lines starting with // are ignored. Save an empty file to go back to the menu.\n"


def plan_text(plan: PlanDoc) -> str:
    """Return the part of a plan a reviewer edits (goal and steps) as indented JSON."""
    return json.dumps({"goal": plan["goal"], "steps": plan["steps"]}, indent=2, ensure_ascii=False)


def without_comments(text: str) -> str:
    """Return ``text`` without its ``//`` comment lines (the error shown on top, the help)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(COMMENT))


def with_error(text: str, error: str | None) -> str:
    """Return ``text`` under the error and a help line, as ``//`` comment lines (if any error).

    The first opening is the plain JSON, so JSON-aware editors and scripts read it as it is.
    """
    if not error:
        return text
    lines = "".join(f"{COMMENT} error: {line}\n" for line in error.splitlines() or [""])
    return lines + HELP + text


def edit_plan(text: str, error: str | None = None) -> tuple[dict[str, Any] | None, str, str | None]:
    """Open the editor on ``text`` until it saves a JSON object.

    Returns ``(plan, text saved, None)``; or ``(None, text, error)`` to go back to the menu:
    the user saved an empty file, or saved the text again unchanged after an error.
    """
    while True:
        shown = with_error(text, error)
        edited = click.edit(shown, extension=".json", require_save=False)
        body = without_comments(edited if edited is not None else shown)
        if not body.strip():
            return None, "", None
        if error and body == without_comments(text):
            return None, body, error
        try:
            loaded = json.loads(body)
        except json.JSONDecodeError as exc:
            text, error = body, f"this is not valid JSON: {exc}"
            continue
        if isinstance(loaded, dict):
            return loaded, body, None
        text, error = body, 'a plan is a JSON object: {"goal": ..., "steps": [...]}'
