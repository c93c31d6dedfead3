"""Evaluators of one example's run: plain functions ``(outputs, reference_outputs) -> score``.

Each takes the target's :class:`~planexec.evaluation.outputs.TargetOutputs` and the example's
expectations (its ``outputs`` as a dict) and returns ``{"key", "score", "comment"}``: score 1
(met), 0 (missed) or None (the example asks nothing of it). ``langsmith.evaluate`` takes them
as they are (``evaluators=DEFAULT_EVALUATORS``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from agentevals.trajectory.match import (  # type: ignore[import-untyped]
    create_trajectory_match_evaluator,
)
from langsmith import run_helpers

from planexec.evaluation.dataset import Expectations, ExpectedCall, Trajectory
from planexec.evaluation.outputs import EvalScore

Evaluator = Callable[[Mapping[str, Any], Mapping[str, Any]], EvalScore]
"""An evaluator: ``(outputs, reference_outputs) -> EvalScore``."""


def _expected(reference_outputs: Mapping[str, Any]) -> Expectations:
    return Expectations.model_validate(dict(reference_outputs or {}))


def _score(key: str, met: bool | None, comment: str) -> EvalScore:
    return EvalScore(key=key, score=None if met is None else int(met), comment=comment)


def plan_valid_first_time(
    outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]
) -> EvalScore:
    """Say whether the planner's first draft was a valid plan (no repair asked)."""
    valid = outputs.get("plan_valid_first_time")
    if valid is None:
        return _score("plan_valid_first_time", None, "no plan was drafted by the planner")
    return _score("plan_valid_first_time", bool(valid),
                  "valid at once" if valid else "needed repairs, or no valid plan")  # fmt: skip


def _messages(calls: list[ExpectedCall]) -> list[dict[str, Any]]:
    """One assistant message a call (agentevals' trajectory shape)."""
    made = []
    for call in calls:
        function = {"name": call.tool, "arguments": json.dumps(call.args or {}, default=str)}
        made.append({"role": "assistant", "content": "", "tool_calls": [{"function": function}]})
    return made


ABSENT = "<absent>"
"""An expected argument the executed call did not have."""


def _projected(ran: list[ExpectedCall], expected: list[ExpectedCall]) -> list[ExpectedCall]:
    """Keep of each executed call only the arguments some expected call of its tool names.

    An argument named but not given is :data:`ABSENT` (it cannot equal an expected value).
    """
    named: dict[str, set[str]] = {}
    for call in expected:
        named.setdefault(call.tool, set()).update(call.args or {})
    return [
        ExpectedCall(
            tool=c.tool,
            args={k: (c.args or {}).get(k, ABSENT) for k in sorted(named.get(c.tool, set()))},
        )
        for c in ran
    ]


def same_value(first: Any, second: Any) -> bool:
    """Say whether two JSON values are equal with their types: ``true`` is not ``1``.

    Numbers compare by value (``1`` is ``1.0``); objects and lists item by item.
    """
    if isinstance(first, bool) or isinstance(second, bool):
        return type(first) is type(second) and first == second
    if isinstance(first, int | float) and isinstance(second, int | float):
        return first == second
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(same_value(first[k], second[k]) for k in first)
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(same_value, first, second))
    return type(first) is type(second) and first == second


def _agree(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Say whether two calls' arguments agree on every name both have (either way round)."""
    return all(same_value(first[k], second[k]) for k in first.keys() & second.keys())


def _specific_first(calls: list[ExpectedCall], mode: str) -> list[ExpectedCall]:
    """Order expected calls so that those naming more arguments are matched first.

    agentevals matches the calls of the unordered modes greedily, in order: a bare ``x``
    first would take the executed ``x`` an ``x(k=1)`` needs. Strict keeps the order.
    """
    if mode == "strict":
        return calls
    return sorted(calls, key=lambda c: -len(c.args or {}))


def _differing(ran: list[ExpectedCall], expected: list[ExpectedCall]) -> str:
    """Say, for each expected call no executed call of its tool agrees with, what differs."""
    said = []
    for call in expected:
        if not call.args:
            continue
        same_tool = [c for c in ran if c.tool == call.tool]
        if not same_tool or any(_agree(call.args, c.args or {}) for c in same_tool):
            continue
        got = same_tool[0].args or {}
        names = [k for k in call.args if not same_value(call.args[k], got.get(k, ABSENT))]
        shown = ", ".join(
            f"{k} expected {_json(call.args[k])}, ran {_json(got.get(k, ABSENT))}" for k in names
        )
        said.append(f"{call.tool}: {shown}")
    return "; ".join(said[:5])


def _json(value: Any) -> str:
    text = value if value is ABSENT else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def trajectory(outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]) -> EvalScore:
    """Match the run's tools against the expected ones (agentevals' trajectory match).

    ``tools`` expected: the first plan's tools, in plan order (strict). ``trajectory``
    expected: the tool steps that ran, in the order they started, in the example's mode
    (``strict``, ``unordered``, ``subset``, ``superset``; in the last three a call counts
    once, so a repeated call must be expected as often as it ran, or less for ``superset``).
    An expected call's ``args`` must equal the executed call's arguments of those names, as
    planned (``$N`` references unresolved), with their JSON types (``true`` is not ``1``);
    arguments it does not name are ignored. Expected calls naming arguments are matched
    before bare ones; the comment names the arguments that differ.
    """
    expected = _expected(reference_outputs)
    if expected.tools is not None:
        wanted = Trajectory(steps=list(expected.tools), match="strict")
        ran = [ExpectedCall(tool=t) for t in outputs.get("planned_tools") or []]
        what = "planned"
    elif expected.trajectory is not None:
        wanted, what = expected.trajectory, "ran"
        ran = [
            ExpectedCall(tool=c["tool"], args=c["args"]) for c in outputs.get("trajectory") or []
        ]
    else:
        return _score("trajectory", None, "no tools or trajectory expected")
    expected_calls = _specific_first(wanted.calls(), wanted.match)
    match = create_trajectory_match_evaluator(
        trajectory_match_mode=wanted.match,
        tool_args_match_mode="exact",
        tool_args_match_overrides={c.tool: _agree for c in [*ran, *expected_calls]},
    )
    shown_ran = _projected(ran, expected_calls)
    with run_helpers.tracing_context(enabled=False):  # a score, not a trace of its own
        result = match(outputs=_messages(shown_ran), reference_outputs=_messages(expected_calls))
    met = bool(result["score"]) if isinstance(result, dict) else False
    shown = ", ".join(c.tool for c in ran) or "none"
    expected_names = ", ".join(c.tool for c in wanted.calls()) or "none"
    comment = f"{wanted.match}: {what} [{shown}], expected [{expected_names}]"
    differing = "" if met else _differing(ran, expected_calls)
    return _score(
        "trajectory", met, comment + (f"; arguments differ: {differing}" if differing else "")
    )


NUMBER = re.compile(r"(?<![\w.])-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[+-]?\d{1,2})?(?!\w)")
"""A number as written: optional minus, thousands commas, decimals or a bare ``.5``, a small
exponent (``1e3``; at most two digits, so a huge one is never written out)."""
MINUSES = str.maketrans({"\u2212": "-", "\u2013": "-", "\ufe63": "-", "\uff0d": "-"})
"""Minus signs formatters print, read as ``-`` (NFKC keeps U+2212)."""


def normalised(text: str) -> str:
    """Return text as facts are compared: NFKC, lower case, one space between words, numbers plain.

    A number loses its thousands separators and trailing zeros (``897,325.00`` is ``897325``,
    ``.5`` is ``0.5``, ``1e3`` is ``1000``), a minus sign is ``-`` (U+2212 too), and a percent
    sign follows its number (``12 %`` is ``12%``).
    """

    def plain(match: re.Match[str]) -> str:
        written = match.group()
        if re.match(r"-?0\d", written):  # "05", "007": a code or a time's minutes, kept
            return written
        digits = written.replace(",", "")
        if "," in written and not re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?(e[+-]?\d+)?", written):
            return written  # a list of numbers ("1,2,3"), not one number
        try:
            value = Decimal(digits).normalize()
        except InvalidOperation:
            return written
        return format(value, "f")

    text = unicodedata.normalize("NFKC", text).translate(MINUSES).lower()
    text = re.sub(r"(\d)\s+%", r"\1%", text)
    return " ".join(NUMBER.sub(plain, text).split())


def _appears(fact: str, text: str) -> bool:
    """Say whether ``fact`` appears in ``text`` as whole words and whole numbers.

    ``89732`` is not in ``897325``, ``3`` not in ``3.5`` (nor ``897325`` in ``897325.75``),
    ``5`` not in ``-5`` or ``2.5``, ``-5`` not in ``10-5``; ``5`` is in ``3-5`` (a range) and
    ``7`` in ``3,5,7`` (:func:`normalised` has taken thousands separators out already).
    """
    start = r"(?<!\w)" if fact[:1].isalnum() else ""
    if fact[:1].isdigit():  # not after a minus sign (a range's "3-5" is fine), nor decimals
        start += r"(?<!(?<!\w)-)(?<!\d\.)"
    if fact[:1] == "-":  # a minus sign, not a subtraction ("10-5")
        start += r"(?<![\w.])"
    end = r"(?!\w)" if fact[-1:].isalnum() else ""
    if fact[-1:].isdigit():  # not before decimals (commas left between digits are lists)
        end += r"(?!\.\d)"
    return re.search(start + re.escape(fact) + end, text) is not None


PREVIEW = re.compile(r"\(the whole output: [^\n]*?(?:--output (\d+)|steps\['(\d+)'\])")
"""The finalizer's note after a step's output it cut short (where to read it whole)."""


def _previewed(outputs: Mapping[str, Any]) -> dict[str, str]:
    """Return the whole outputs of the steps the answer shows cut short, as text, by step."""
    shown = outputs.get("step_outputs") or {}
    whole: dict[str, str] = {}
    for match in PREVIEW.finditer(str(outputs.get("answer") or "")):
        step = match.group(1) or match.group(2)
        if step in shown and step not in whole:
            output = shown[step]
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False,
                                                                      default=str)  # fmt: skip
            whole[step] = normalised(text)
    return whole


def answer_facts(outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]) -> EvalScore:
    """Say whether every expected fact appears in the answer, as whole words and numbers.

    Both are compared :func:`normalised`: case, spacing and number formats do not count. Where
    the answer shows a step's output cut short (a long value's preview), the fact may be in
    that step's whole output (a spilled one's contents are not at hand: only its size); the
    comment says where facts were found, or where they were looked for.
    """
    facts = _expected(reference_outputs).facts
    if not facts:
        return _score("answer_facts", None, "no facts expected")
    answer = normalised(str(outputs.get("answer") or ""))
    whole = _previewed(outputs)
    missing, elsewhere = [], 0
    for fact in facts:
        wanted = normalised(fact)
        if _appears(wanted, answer):
            continue
        if any(_appears(wanted, text) for text in whole.values()):
            elsewhere += 1
        else:
            missing.append(fact)
    steps_named = " and ".join(f"step {s}'s whole output" for s in whole)
    if missing:
        shown = "; ".join(repr(f[:80]) for f in missing[:5])
        where = f" (looked in the answer and {steps_named})" if whole else ""
        return _score(
            "answer_facts", False, f"{len(missing)} of {len(facts)} missing: {shown}{where}"
        )
    found = f" ({elsewhere} in {steps_named}, which the answer cuts short)" if elsewhere else ""
    return _score("answer_facts", True, f"all {len(facts)} found{found}")


def final_status(outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]) -> EvalScore:
    """Say whether the run ended with the expected status (default: succeeded)."""
    wanted, got = _expected(reference_outputs).status, str(outputs.get("status"))
    why = [str(outputs["error"])] if outputs.get("error") else []
    why += [
        f"step {f['step']} [{f.get('tool')}] {f.get('status')}: {f.get('error') or ''}"
        for f in outputs.get("failed_steps") or []
    ]
    said = f" ({'; '.join(why)})" if why and got != wanted else ""
    return _score("final_status", got == wanted, f"{got}, expected {wanted}{said}")


def _limit(key: str, value_key: str, limit_key: str, unit: str) -> Evaluator:
    def evaluator(outputs: Mapping[str, Any], reference_outputs: Mapping[str, Any]) -> EvalScore:
        value = outputs.get(value_key) or 0
        limit = getattr(_expected(reference_outputs), limit_key)
        if limit is None:
            return _score(key, None, f"{value:g}{unit}, no limit")
        return _score(key, value <= limit, f"{value:g}{unit} of at most {limit:g}{unit}")

    evaluator.__name__ = evaluator.__qualname__ = key
    evaluator.__doc__ = f"Say whether the run's {value_key} stayed within {limit_key}."
    return evaluator


steps = _limit("steps", "steps_run", "max_steps", "")
model_calls = _limit("model_calls", "model_calls", "max_model_calls", "")
tokens = _limit("tokens", "tokens", "max_tokens", "")
cost = _limit("cost", "cost", "max_cost", " USD")
wall_time = _limit("wall_time", "wall_seconds", "max_seconds", " s")

DEFAULT_EVALUATORS: tuple[Evaluator, ...] = (
    plan_valid_first_time,
    trajectory,
    answer_facts,
    final_status,
    steps,
    model_calls,
    tokens,
    cost,
    wall_time,
)
"""Every evaluator but the LLM judge, in the order the results table shows them."""
