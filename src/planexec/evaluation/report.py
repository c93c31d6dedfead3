"""An evaluation's figures: totals over the examples, thresholds, and the JSON report.

Thresholds are written ``NAME=VALUE``: ``--min pass_rate=0.9`` (the share of examples that
passed every evaluator), ``--min trajectory=1`` (an evaluator's mean score over the examples it
applies to), ``--max tokens=20000`` (a total over the examples: ``model_calls``, ``tokens``,
``cost``, ``wall_time``, ``steps``). Missing one makes ``planexec eval`` exit 1. A threshold
that is always or never met is refused: a ``--min`` is between 0 and 1 (a mean or a share), a
``--max`` at least 0 (a total). ``wall_time`` is the sum of the examples' times, not the
evaluation's elapsed time (examples run concurrently).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from typing_extensions import TypedDict

from planexec.errors import PlanexecError
from planexec.evaluation.runner import ExampleResult

TOTALS = {
    "model_calls": "model_calls",
    "tokens": "tokens",
    "cost": "cost",
    "wall_time": "wall_seconds",
    "steps": "steps_run",
}
"""Names ``--max`` takes, and the output each sums."""


class ThresholdError(PlanexecError):
    """A threshold written wrong (a usage error): one line saying what is accepted."""


@dataclass(frozen=True)
class Threshold:
    """``--min NAME=VALUE`` or ``--max NAME=VALUE``."""

    bound: Literal["min", "max"]
    name: str
    limit: float

    def __str__(self) -> str:
        """Return it as written on the command line."""
        return f"--{self.bound} {self.name}={self.limit:g}"


class Totals(TypedDict):
    """What the examples add up to."""

    examples: int
    passed: int
    pass_rate: float
    model_calls: int
    tokens: int
    cost: float
    wall_time: float
    steps: int
    means: dict[str, float]


class Verdict(TypedDict):
    """A threshold, the value it was checked against, and whether it was met."""

    threshold: str
    value: float | None
    met: bool


def parse_threshold(bound: Literal["min", "max"], text: str, known: Iterable[str]) -> Threshold:
    """Read ``NAME=VALUE`` for ``--min``/``--max``; raise :class:`ThresholdError` if wrong."""
    names = sorted({"pass_rate", *known}) if bound == "min" else sorted(TOTALS)
    name, sep, value = text.partition("=")
    name = name.strip()
    try:
        limit = float(value)
    except ValueError:
        limit = math.nan
    if not sep or not math.isfinite(limit) or name not in names:
        raise ThresholdError(
            f"--{bound} {text}: write NAME=NUMBER with NAME one of {', '.join(names)}"
        )
    if bound == "min" and not 0 <= limit <= 1:
        what = "the share of examples passing (a mean)" if name == "pass_rate" else "a mean score"
        raise ThresholdError(f"--min {text}: {name} is {what}, between 0 and 1")
    if bound == "max" and limit < 0:
        raise ThresholdError(f"--max {text}: {name} is a total over the examples, at least 0")
    return Threshold(bound, name, limit)


def percent(share: float) -> str:
    """Return a share as a percentage floored to one decimal: 399 of 400 is 99.7%, not 100%."""
    tenths = math.floor(share * 1000 + 1e-9)
    return f"{tenths // 10}%" if tenths % 10 == 0 else f"{tenths / 10:.1f}%"


def totals(results: Sequence[ExampleResult]) -> Totals:
    """Add up the examples: passes, model calls, tokens, cost, time; each evaluator's mean."""
    outs = [r.outputs for r in results]
    scores: dict[str, list[int]] = {}
    for result in results:
        for key, score in result.scores.items():
            if score["score"] is not None:
                scores.setdefault(key, []).append(score["score"])
    passed = sum(r.passed for r in results)
    return Totals(
        examples=len(results),
        passed=passed,
        pass_rate=round(passed / len(results), 4) if results else 0.0,
        model_calls=sum(o["model_calls"] for o in outs),
        tokens=sum(o["tokens"] for o in outs),
        cost=round(sum(o["cost"] for o in outs), 8),
        wall_time=round(sum(o["wall_seconds"] for o in outs), 3),
        steps=sum(o["steps_run"] for o in outs),
        means={k: round(sum(v) / len(v), 4) for k, v in scores.items()},
    )


def verdicts(figures: Totals, thresholds: Sequence[Threshold]) -> list[Verdict]:
    """Check each threshold; an evaluator no example applied to has no value (missed)."""
    checked = []
    for threshold in thresholds:
        value: float | None
        if threshold.name == "pass_rate":
            value = figures["pass_rate"]
        elif threshold.bound == "min":
            value = figures["means"].get(threshold.name)
        else:
            value = float(figures[threshold.name])  # type: ignore[literal-required]
        met = value is not None and (
            value >= threshold.limit if threshold.bound == "min" else value <= threshold.limit
        )
        checked.append(Verdict(threshold=str(threshold), value=value, met=met))
    return checked


def report_json(
    results: Sequence[ExampleResult], figures: Totals, checked: Sequence[Verdict]
) -> dict[str, Any]:
    """Return the whole report as JSON data (``planexec eval --json``)."""
    return {
        "examples": [
            {
                "id": r.example.id,
                "task": r.example.inputs.task,
                "passed": r.passed,
                "scores": r.scores,
                "outputs": r.outputs,
            }
            for r in results
        ],
        "totals": figures,
        "thresholds": list(checked),
        "passed": all(v["met"] for v in checked),
    }
