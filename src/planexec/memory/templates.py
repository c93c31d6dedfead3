"""Plan templates: an approved plan with its task's specifics made parameters, and back.

A parameter is a piece of the task that the plan uses: a file name, a date or month, a number,
a quoted name, or a word of the task that is a whole argument value of a step (a column such as
``revenue``). The task becomes a pattern with those pieces as its blanks, so a new task that
fits the pattern fills the plan's blanks with no model call.
"""

from __future__ import annotations

import re
from typing import Any

from planexec.plan.references import iter_references

FILE = r"[\w.-]+\.(?:csv|tsv|txt|md|json|parquet|xlsx|xls|png|html)"
SPECIFIC = re.compile(
    rf"`[^`]+`|\"[^\"]+\"|'[^']+'|{FILE}|\d{{4}}-\d{{2}}(?:-\d{{2}})?|\d+(?:\.\d+)?"
)
"""Pieces of a task that are specific to it whatever the plan does with them."""
WORD = re.compile(r"[A-Za-z_][\w-]*")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "in",
        "on",
        "to",
        "for",
        "by",
        "with",
        "from",
        "into",
        "as",
        "at",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "per",
        "each",
        "every",
        "all",
        "then",
        "than",
        "or",
        "write",
        "make",
        "show",
        "give",
        "get",
        "use",
    ]
)
MIN_SHARED_KEYWORDS = 0.5
"""Jaccard similarity of keywords above which a template is adapted by the cheap model."""


def keywords(task: str) -> list[str]:
    """Return the task's words that say what it is about (lowercased, no stopwords)."""
    words = {w.lower() for w in WORD.findall(SPECIFIC.sub(" ", task))}
    return sorted(w for w in words if len(w) > 2 and w not in STOPWORDS)


def similarity(left: list[str], right: list[str]) -> float:
    """Return the Jaccard similarity of two keyword lists."""
    a, b = set(left), set(right)
    return len(a & b) / len(a | b) if a | b else 0.0


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {s for v in value.values() for s in _strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in _strings(v)}
    return set()


def parameters(task: str, plan: dict[str, Any]) -> list[str]:
    """Return the task's pieces the plan's steps use, in the order they appear in the task.

    Only the steps count: a piece the goal repeats but no step uses (a number a step takes as
    a number, not text) is not a parameter, or a new task would claim a value that never runs.
    """
    used = _strings(plan.get("steps"))
    text = " ".join(used)
    found: list[str] = []
    for match in re.finditer(rf"{SPECIFIC.pattern}|{WORD.pattern}", task):
        piece = match.group(0).strip("`\"'")
        whole_value = piece in used and WORD.fullmatch(piece) is not None
        specific = SPECIFIC.fullmatch(match.group(0)) is not None and piece in text
        if piece and (whole_value or specific) and piece not in found and len(piece) > 1:
            found.append(piece)
    return found


def pattern(task: str, params: list[str]) -> str:
    """Return a regular expression a task of the same shape matches, a group per parameter."""
    out, pos = [], 0
    spans = []
    for value in params:
        match = re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", task[pos:])
        if match is None:
            continue
        spans.append((pos + match.start(), pos + match.end()))
        pos += match.end()
    pos = 0
    for start, end in spans:
        out.append(_words(task[pos:start]))
        out.append(r"[`\"']?([\w./-]+)[`\"']?")
        pos = end
    out.append(_words(task[pos:]))
    return "".join(out)


def _words(text: str) -> str:
    """Return the text between two parameters as a pattern: its words, and whitespace.

    Whitespace is required where the text has some: optional whitespace between two parameters
    backtracks quadratically.
    """
    words = text.split()
    if not words:
        return r"\s+" if text else ""
    lead = r"\s+" if text[:1].isspace() else ""
    trail = r"\s+" if text[-1:].isspace() else ""
    return lead + r"\s+".join(re.escape(w) for w in words) + trail


def placeholder(index: int) -> str:
    """Return the placeholder of parameter ``index`` in a template's plan."""
    return "{{p" + str(index) + "}}"


def parametrized(value: Any, params: list[str]) -> Any:
    """Replace each parameter's whole-token occurrences in the plan's text by its placeholder."""
    if isinstance(value, str):
        for i, param in enumerate(params):
            value = re.sub(rf"(?<![\w.]){re.escape(param)}(?![\w])", placeholder(i), value)
        return value
    if isinstance(value, dict):
        return {k: parametrized(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [parametrized(v, params) for v in value]
    return value


def filled(value: Any, values: list[str]) -> Any:
    """Put the new task's values where the template's placeholders are."""
    if isinstance(value, str):
        for i, new in enumerate(values):
            value = value.replace(placeholder(i), new)
        return value
    if isinstance(value, dict):
        return {k: filled(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, values) for v in value]
    return value


def tools_used(plan: dict[str, Any]) -> set[str]:
    """Return the names of the tools a (full-format) plan's steps call or may call."""
    used: set[str] = set()
    for step in plan.get("steps") or []:
        if isinstance(step, dict):
            used.update(str(t) for t in [step.get("tool"), *(step.get("tools") or [])] if t)
    return used


def compact_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Return a full-format plan in the compact format a planner writes (and reads back).

    What the full format derives is left out: ids in order, dependencies its references
    imply, tool steps' descriptions (a tool step says what it does), empty fields.
    """
    steps = [s for s in plan.get("steps") or [] if isinstance(s, dict)]
    in_order = [s.get("id") for s in steps] == list(range(1, len(steps) + 1))
    compact = []
    for step in steps:
        tool, args = step.get("tool"), step.get("args") or {}
        out: dict[str, Any] = {} if in_order else {"id": step.get("id")}
        if tool:
            out[str(tool)] = args
        else:
            out["description"] = step.get("description", "")
            out |= {k: step[k] for k in ("args", "tools") if step.get(k)}
        referenced = {ref for ref, _ in iter_references(args)}
        extra = [d for d in step.get("depends_on") or [] if d not in referenced]
        out |= {"depends_on": extra} if extra else {}
        out |= {
            k: v
            for k, v in step.items()
            if k in {"expected_output", "on_failure"} and v not in (None, "")
        }
        compact.append(out)
    return {"goal": plan.get("goal"), "steps": compact}
