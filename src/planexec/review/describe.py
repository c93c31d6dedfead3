"""The plan in Markdown for a reviewer: its steps, side-effecting tools and model calls.

Chat UIs render it (Agent Chat UI shows it in the chat, above the approval's controls): the
plan's own words are shown as text or code, never as Markdown, so a plan cannot show an image
(which the reviewer's browser would fetch at once), a link or HTML.

This module is the one place that makes text Markdown-safe for a human: :func:`escaped` (plain
text: every markup character escaped) and :func:`markdown_prose` (Markdown kept, but no image
and no math). Dollar signs are escaped in both: Agent Chat UI reads ``$…$`` as a LaTeX formula,
so "$0.0011–$0.0063" would render as math. JSON fields programs read are never escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from typing_extensions import TypedDict

from planexec.state import PlanDoc

ARG_CELL = 80
"""Characters of a step's args shown in the description's table."""
PRODUCES_CELL = 100
"""Characters of a step's output shape shown in the description's table."""
MARKUP = re.compile(r"([\\`*_\[\]<>!|~$])")
"""Characters that start Markdown markup (links, images, HTML, code, emphasis, table cells,
math)."""
PROSE_MARKUP = re.compile(r"(?<!\\)(?P<escapes>(?:\\\\)*)(?P<char>\$|!(?=\[)|<(?=[A-Za-z/!?]))")
"""What Markdown prose may not start: math (``$``), images (``![``, also ``![a][ref]``) and raw
HTML (``<img …>``, ``<svg …>``: a ``<`` that opens a tag, a comment or an autolink).

Each is found with the backslashes before it, taken two by two: CommonMark reads a backslash
before any ASCII punctuation as an escape, so ``\\\\`` is a literal backslash and the ``![``
after it a live image. An even run (none included) leaves the character live; an odd run has
already escaped it, and no match is found there."""


class ModelCallEstimate(TypedDict):
    """Model calls the plan needs if no step is retried: at least ``low``, at most ``high``."""

    low: int
    high: int


def estimate_model_calls(plan: PlanDoc, *, max_turns: int, judge: bool) -> ModelCallEstimate:
    """Model calls running ``plan`` takes: its model steps' turns, and the judge's one call."""
    model_steps = sum(1 for s in plan["steps"] if s["tool"] is None)
    return ModelCallEstimate(
        low=model_steps + int(judge), high=model_steps * max_turns + int(judge)
    )


def describe_plan(
    plan: PlanDoc,
    side_effect_tools: list[str],
    calls: ModelCallEstimate,
    problems: list[str],
    estimate: Sequence[str] = (),
    produces: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> str:
    """Describe the plan for a reviewer in Markdown: steps, side effects, model calls.

    ``estimate`` holds the lines of :func:`planexec.review.estimate.estimate_lines`;
    ``produces`` what each tool step returns (step id: shape in a line), shown by the step;
    ``notes`` says why some side-effecting tools are (an MCP tool's ``destructive (server
    hint)``).
    """
    notes = notes or {}
    lines = [
        f"**Plan v{plan['version']}**: {_cell(plan['goal'], 300)}",
        "",
        "| # | tool | args | after | produces |",
        "|---|------|------|-------|----------|",
    ]
    for step in plan["steps"]:
        if step["tool"]:
            tool = _code(step["tool"], 60)
            args = _code(json.dumps(step["args"], ensure_ascii=False), ARG_CELL)
        else:
            tool = "model" + (f" ({_code(', '.join(step['tools']), 60)})" if step["tools"] else "")
            args = _cell(step["description"], ARG_CELL)
        after = ", ".join(str(d) for d in step["depends_on"])
        shape = (produces or {}).get(str(step["id"]))
        made = _code(shape, PRODUCES_CELL) if shape else ""
        lines.append(f"| {step['id']} | {tool} | {args} | {after} | {made} |")
    lines += [
        "",
        "Side-effecting tools: "
        + (
            ", ".join(
                _code(t, 60, table=False) + (f" ({_cell(notes[t], 80)})" if t in notes else "")
                for t in side_effect_tools
            )
            or "none"
        )
        + ".",
        f"Model calls to run it: {calls['low']}"
        + (f" to {calls['high']}" if calls["high"] != calls["low"] else "")
        + " (if no step is retried).",
        *(escaped(line, 300) for line in estimate),
    ]
    if problems:
        lines += ["", "**Cannot run as it is:** " + "; ".join(_cell(p, 200) for p in problems)]
    return "\n".join(lines)


def _one_line(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def escaped(text: str, limit: int) -> str:
    """Return ``text`` as plain Markdown text: one line, markup escaped, cut at ``limit``."""
    return _cell(text, limit)


def markdown_prose(text: str) -> str:
    """Return Markdown text (an answer, a report) fit to show a human: ``$`` and ``![`` escaped.

    Every ``$`` and every ``!`` before ``[`` ends up after an odd number of backslashes, however
    many the text put there (see :data:`PROSE_MARKUP`). A chat UI reads ``$…$`` as a LaTeX
    formula (Agent Chat UI does), and renders an image at once, which the reader's browser
    fetches (a link needs a click). Raw HTML (``<img src=…>``) is escaped too: Agent Chat UI
    does not render it (react-markdown, no rehype-raw), other Markdown clients may. Its other
    markup is kept.
    """
    return PROSE_MARKUP.sub(r"\g<escapes>\\\g<char>", text)


def _cell(text: str, limit: int) -> str:
    """``text`` as plain text in one Markdown table cell: one line, markup escaped, cut."""
    return MARKUP.sub(r"\\\1", _one_line(text, limit))


def _code(text: str, limit: int, *, table: bool = True) -> str:
    """``text`` as a code span (nothing in it is markup), by default in a table cell."""
    content = _one_line(text, limit)
    if table:
        content = content.replace("|", "\\|")  # GFM: a pipe ends the cell even in a code span
    fence = "`" * (max((len(run) for run in re.findall("`+", content)), default=0) + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{fence}{pad}{content}{pad}{fence}"
