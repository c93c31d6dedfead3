"""What a plan will cost, shown at its approval: model calls, tokens, cost and time.

Spent so far is counted (the run's ``usage``); what the plan needs is an estimate: each model
step takes 1 to ``max_executor_turns`` calls (plus the judge's one call a round when it is on),
each call about its prompt's length in tokens (4 characters a token) plus
:data:`OUTPUT_TOKENS_PER_CALL`; its cost is priced like a budget's
(:mod:`planexec.spending.budget`),
and unknown when a model has no price. The time is the slowest chain of dependencies, adding
the typical seconds the tools declare (:meth:`ToolRegistry.register`); steps whose tool
declares none count 0, and the estimate says how many of them there were.
"""

from __future__ import annotations

import json
from graphlib import CycleError

from typing_extensions import TypedDict

from planexec.context import Context
from planexec.llm import prompts
from planexec.plan.doc import topological_order
from planexec.spending.budget import ModelPrice, limits_of, price_of
from planexec.state import PlanDoc, RoleUsage, State
from planexec.tools.registry import ToolRegistry

CHARS_PER_TOKEN = 4
OUTPUT_TOKENS_PER_CALL = 300
"""Tokens assumed for each model reply (a step's answer, a judge's verdicts)."""


class Spent(TypedDict):
    """What the run has spent so far (counted)."""

    calls: int
    tokens: int
    cost: float | None
    """USD; None when a model that was called has no price."""


class Expected(TypedDict):
    """What running the plan should take (estimated), at least and at most."""

    calls: tuple[int, int]
    tokens: tuple[int, int]
    cost: tuple[float, float] | None
    """USD; None when the executor's (or the judge's) model has no price."""


class TimeEstimate(TypedDict):
    """The slowest chain of dependencies and the typical time of its tools."""

    chain: list[int]
    seconds: float
    undeclared: int
    """Steps of the chain whose time is not known (a model step, a tool without a latency)."""


class Estimate(TypedDict):
    """The approval's estimate: spent so far, expected for the plan, time, and the budgets."""

    spent: Spent
    expected: Expected
    time: TimeEstimate
    budgets: dict[str, float]
    """The run's limits that are set (max_tokens, max_cost, max_seconds)."""


def estimate(state: State, plan: PlanDoc, tools: ToolRegistry, ctx: Context) -> Estimate:
    """Estimate what approving ``plan`` commits the run to, next to what it has spent."""
    limits = limits_of(ctx)
    set_limits = {
        "max_tokens": limits["max_tokens"],
        "max_cost": limits["max_cost"],
        "max_seconds": limits["max_seconds"],
    }
    budgets = {name: float(value) for name, value in set_limits.items() if value is not None}
    return Estimate(
        spent=_spent(state.get("usage") or {}, ctx),
        expected=_expected(plan, ctx),
        time=_slowest_chain(plan, tools),
        budgets=budgets,
    )


def _spent(usage: dict[str, RoleUsage], ctx: Context) -> Spent:
    prices = limits_of(ctx)["prices"]
    cost: float | None = 0.0
    for role, used in usage.items():
        price = prices.get(role)
        if price is None and used["calls"]:
            cost = None
        elif price is not None and cost is not None:
            cost += (
                used["input_tokens"] * price["input"] + used["output_tokens"] * price["output"]
            ) / 1e6
    return Spent(
        calls=sum(u["calls"] for u in usage.values()),
        tokens=sum(u["input_tokens"] + u["output_tokens"] for u in usage.values()),
        cost=cost,
    )


def _expected(plan: PlanDoc, ctx: Context) -> Expected:
    model_steps = [s for s in plan["steps"] if s["tool"] is None]
    turns = max(1, ctx.max_executor_turns)
    prompt = sum(
        len(prompts.EXECUTOR_SYSTEM + json.dumps(s, ensure_ascii=False)) // CHARS_PER_TOKEN
        for s in model_steps
    )
    calls = len(model_steps)
    judge = int(ctx.llm_judge)  # one call a round
    judge_in = judge * len(prompts.JUDGE_SYSTEM + json.dumps(plan["steps"])) // CHARS_PER_TOKEN
    judge_out = judge * OUTPUT_TOKENS_PER_CALL
    low = (prompt, calls * OUTPUT_TOKENS_PER_CALL)  # one turn a model step
    high = (prompt * turns, calls * turns * OUTPUT_TOKENS_PER_CALL)
    executor = price_of(ctx.executor_model, ctx.model_prices) if calls else _FREE
    evaluator = price_of(ctx.evaluator_model, ctx.model_prices) if judge else _FREE
    cost = None
    if executor is not None and evaluator is not None:
        judged = _cost(judge_in, judge_out, evaluator)
        cost = (_cost(*low, executor) + judged, _cost(*high, executor) + judged)
    return Expected(
        calls=(calls + judge, calls * turns + judge),
        tokens=(sum(low) + judge_in + judge_out, sum(high) + judge_in + judge_out),
        cost=cost,
    )


_FREE = ModelPrice(input=0.0, output=0.0)
"""The price of a model the plan does not call."""


def _cost(tokens_in: int, tokens_out: int, price: ModelPrice) -> float:
    return (tokens_in * price["input"] + tokens_out * price["output"]) / 1e6


def _slowest_chain(plan: PlanDoc, tools: ToolRegistry) -> TimeEstimate:
    try:
        ordered = topological_order(plan["steps"])
    except CycleError:  # an invalid plan edited into state: the approval shows why, not a time
        return TimeEstimate(chain=[], seconds=0.0, undeclared=0)
    # per step: (seconds, steps) of the slowest chain ending there, and the step before it
    best: dict[int, tuple[float, int]] = {}
    before: dict[int, int | None] = {}
    for step in ordered:
        own = tools.typical_latency(step["tool"]) or 0.0
        deps = [d for d in step["depends_on"] if d in best]
        prev = max(deps, key=best.__getitem__, default=None)
        seconds_before, length = best[prev] if prev is not None else (0.0, 0)
        best[step["id"]] = (seconds_before + own, length + 1)
        before[step["id"]] = prev
    last = max(best, key=best.__getitem__, default=None)
    chain: list[int] = []
    while last is not None:
        chain.append(last)
        last = before[last]
    chain.reverse()
    seconds = best[chain[-1]][0] if chain else 0.0
    tool_of = {s["id"]: s["tool"] for s in plan["steps"]}
    undeclared = sum(1 for sid in chain if tools.typical_latency(tool_of[sid]) is None)
    return TimeEstimate(chain=chain, seconds=seconds, undeclared=undeclared)


def estimate_lines(found: Estimate) -> list[str]:
    """Say the estimate in plain lines (numbers only: no text of the plan's)."""
    expected, spent, chain = found["expected"], found["spent"], found["time"]
    calls_low, calls_high = expected["calls"]
    lines = [
        f"Expected for this plan: {_range(calls_low, calls_high, '{:,}')} "
        f"{_plural(calls_high, 'model call')}, about "
        f"{_range(*expected['tokens'], '{:,}')} {_plural(expected['tokens'][1], 'token')}, "
        + (_range(*expected["cost"], "${:.4f}") if expected["cost"] else "cost unknown (no price)")
        + " (estimate).",
        f"Spent so far: {spent['calls']:,} {_plural(spent['calls'], 'model call')}, "
        f"{spent['tokens']:,} {_plural(spent['tokens'], 'token')}, "
        + (f"${spent['cost']:.4f}." if spent["cost"] is not None else "cost unknown (no price)."),
    ]
    if chain["chain"]:
        steps = _plural(len(chain["chain"]), "step")
        path = " → ".join(str(sid) for sid in chain["chain"])
        untimed = chain["undeclared"]
        if untimed == len(chain["chain"]):
            lines.append(f"Slowest chain: {steps} {path} (no tool on it declares a typical time).")
        else:
            note = f" plus {untimed} {_plural(untimed, 'step')} of unknown time" if untimed else ""
            lines.append(f"Slowest chain: {steps} {path}, about {chain['seconds']:.1f} s{note}.")
    budgets = found["budgets"]
    if budgets:
        shown = {
            "max_tokens": lambda v: f"{int(v):,} tokens",
            "max_cost": lambda v: f"${v:.4f}",
            "max_seconds": lambda v: f"{v:g} s of working time",
        }
        lines.append(
            "Budgets of this run: at most "
            + " · ".join(shown[name](value) for name, value in budgets.items())
            + "."
        )
    return lines


def _plural(count: float, word: str) -> str:
    return word if count == 1 else f"{word}s"


def _range(low: float, high: float, form: str) -> str:
    return form.format(low) if low == high else f"{form.format(low)}–{form.format(high)}"
