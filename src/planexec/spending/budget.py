"""Budgets of a run: model tokens, model cost and working time, enforced in two places.

* Every model call goes through :meth:`planexec.llm.scrubbed.ScrubbedChatModel.generate` (or
  ``agenerate``), which calls :func:`check_spending` first: once a budget is spent, no model
  call starts (:class:`BudgetExhausted`).
* Every step attempt starts in :func:`planexec.execution.step.execute_step`, which asks
  :meth:`Budget.stop` first: once a budget is spent, no step starts (it is ``skipped``).

A node makes one :class:`Budget` from the state (what the run spent before it) and the
context (the limits), and shares it with everything it runs through :func:`spending`: the
calls and steps of one round add to it live (under a lock), so parallel steps see each
other's tokens. Calls and steps already running when a budget is reached finish: at most
``max_parallel_steps`` model calls overshoot it. Working time counts the nodes' own time
(``busy_seconds``), not the time a run waits for a human.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from planexec.errors import PlanexecError
from planexec.state import BudgetName, BudgetStop, RoleUsage, add_usage

if TYPE_CHECKING:
    from planexec.context import Context
    from planexec.llm.usage import UsageCounter
    from planexec.state import State


class ModelPrice(TypedDict):
    """What a model costs, in US dollars per million tokens."""

    input: float
    output: float


DEFAULT_PRICES: dict[str, ModelPrice] = {
    # OpenAI list prices (USD per 1M tokens) when this table was written: set yours in the
    # context's model_prices, which takes precedence
    "openai:gpt-4.1": ModelPrice(input=2.0, output=8.0),
    "openai:gpt-4.1-mini": ModelPrice(input=0.4, output=1.6),
    "openai:gpt-4.1-nano": ModelPrice(input=0.1, output=0.4),
    "openai:gpt-4o": ModelPrice(input=2.5, output=10.0),
    "openai:gpt-4o-mini": ModelPrice(input=0.15, output=0.6),
}
NAMES: dict[BudgetName, str] = {"tokens": "token", "cost": "cost", "seconds": "time"}


class BudgetExhausted(PlanexecError):
    """A budget of the run is spent: no model call or step starts."""

    def __init__(self, stop: BudgetStop) -> None:
        """Name the budget, its limit and what was spent."""
        super().__init__(describe_stop(stop))
        self.stop = stop


def describe_stop(stop: BudgetStop) -> str:
    """Say which budget is spent, in one line (``the token budget is spent: 812 of 800``)."""
    unit = {"tokens": " tokens", "cost": " USD", "seconds": " s of working time"}
    spent, limit = stop["spent"], stop["limit"]
    shown = (
        (f"{int(spent):,}", f"{int(limit):,}")
        if stop["budget"] == "tokens"
        else (f"{spent:.6g}", f"{limit:.6g}")
    )
    return (
        f"the {NAMES[stop['budget']]} budget is spent: {shown[0]} of {shown[1]}"
        f"{unit[stop['budget']]}; no new model call or step starts"
    )


class Limits(TypedDict):
    """A run's limits (None: no limit) and the price of each role's model."""

    max_tokens: int | None
    max_cost: float | None
    max_seconds: float | None
    prices: dict[str, ModelPrice | None]
    """Price per role (planner, replanner, executor, evaluator); None: not known."""


ROLE_MODELS = {
    "planner": "planner_model",
    "replanner": "planner_model",
    "executor": "executor_model",
    "evaluator": "evaluator_model",
    "memory": "executor_model",  # adapts a remembered plan
}
"""The context field naming each role's model (the replanner uses the planner's)."""


def limits_of(ctx: Context) -> Limits:
    """Return the run's limits and its models' prices from its context."""
    return Limits(
        max_tokens=ctx.max_tokens,
        max_cost=ctx.max_cost,
        max_seconds=ctx.max_seconds,
        prices={
            role: price_of(getattr(ctx, name), ctx.model_prices)
            for role, name in ROLE_MODELS.items()
        },
    )


def unpriced_models(ctx: Context) -> list[str]:
    """Return the models the run calls that have no price (a cost budget needs every price).

    The evaluator's model counts only when the LLM judge is on.
    """
    names = [n for n in ROLE_MODELS.values() if n != "evaluator_model" or ctx.llm_judge]
    specs = dict.fromkeys(getattr(ctx, name) for name in names)
    return [spec for spec in specs if price_of(spec, ctx.model_prices) is None]


def price_of(spec: str, given: Mapping[str, ModelPrice] | None) -> ModelPrice | None:
    """Return a model's price: the user's table first, then :data:`DEFAULT_PRICES`."""
    table = {**DEFAULT_PRICES, **(given or {})}
    if spec in table:
        return table[spec]
    return table.get(f"openai:{spec}") if ":" not in spec else None


def cost_of(usage: RoleUsage, price: ModelPrice | None) -> float:
    """Return what a role's tokens cost (0 without a price: a cost budget requires prices)."""
    if price is None:
        return 0.0
    return (usage["input_tokens"] * price["input"] + usage["output_tokens"] * price["output"]) / 1e6


@dataclass
class Budget:
    """What a run may still spend, shared by every model call and step of one node run."""

    limits: Limits
    tokens: int = 0
    cost: float = 0.0
    seconds_before: float = 0.0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of_run(
        cls,
        limits: Limits,
        usage: Mapping[str, RoleUsage] | None,
        busy_seconds: float | None,
    ) -> Budget:
        """Start from what the run spent before (its state's ``usage`` and working time)."""
        budget = cls(limits, seconds_before=float(busy_seconds or 0.0))
        for role, spent in (usage or {}).items():
            budget.add(role, spent)
        return budget

    def add(self, role: str, usage: RoleUsage) -> None:
        """Count a finished model call (or a role's calls) against the budget."""
        price = self.limits["prices"].get(role)
        with self._lock:
            self.tokens += usage["input_tokens"] + usage["output_tokens"]
            self.cost += cost_of(usage, price)

    def elapsed(self) -> float:
        """Seconds this node run has worked so far."""
        return time.monotonic() - self.started

    def stop(self) -> BudgetStop | None:
        """Return the first budget that is spent, or None while all have room."""
        limits = self.limits
        with self._lock:
            tokens, cost = self.tokens, self.cost
        seconds = self.seconds_before + self.elapsed()
        if limits["max_tokens"] is not None and tokens >= limits["max_tokens"]:
            return BudgetStop(budget="tokens", limit=limits["max_tokens"], spent=tokens)
        if limits["max_cost"] is not None and cost >= limits["max_cost"]:
            return BudgetStop(budget="cost", limit=limits["max_cost"], spent=cost)
        if limits["max_seconds"] is not None and seconds >= limits["max_seconds"]:
            return BudgetStop(budget="seconds", limit=limits["max_seconds"], spent=seconds)
        return None

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` when a budget is spent."""
        stop = self.stop()
        if stop is not None:
            raise BudgetExhausted(stop)


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "planexec_budget", default=None
)


@contextlib.contextmanager
def spending(budget: Budget) -> Iterator[Budget]:
    """Make ``budget`` the one the model calls and steps started inside this block spend."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> Budget | None:
    """Return the budget of the node run this code runs in (None outside of one)."""
    return _current.get()


def check_spending() -> None:
    """Refuse to start a model call once the current budget is spent (the one choke point)."""
    budget = _current.get()
    if budget is not None:
        budget.check()


def run_budget(state: State, ctx: Context) -> Budget:
    """Return a node run's budget: the context's limits, less what the run spent before."""
    spent = add_usage(state.get("usage"), state.get("speculation_usage"))  # speculation counts
    return Budget.of_run(limits_of(ctx), spent, state.get("busy_seconds"))


def stopped(
    stop: BudgetStop, budget: Budget, counter: UsageCounter | None = None
) -> dict[str, Any]:
    """Return the state update of a node that a spent budget stopped: the run ends with it."""
    update: dict[str, Any] = {
        "error": describe_stop(stop),
        "budget_stop": stop,
        "busy_seconds": budget.elapsed(),
    }
    if counter is not None:
        update["usage"] = counter.usage()
    return update
