"""Run-time configuration: models, limits and policies, editable per assistant in Studio.

A :class:`Context` checks its values when it is made, in one place
(:func:`check_context`): LangGraph makes it from the ``context`` dict of a run (the
LangGraph server passes the assistant's and the run's context that way) before anything is
stored, so a wrong value refuses the run up front with one :class:`InvalidContextError`
naming every wrong field. Types are strict (``"30"`` is not an integer, ``None`` is not a
timeout); numbers must be in range and finite.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, cast, get_type_hints

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
    with_config,
)
from pydantic import BaseModel as _BaseModel
from typing_extensions import TypedDict

from planexec.errors import ConfigurationError
from planexec.guarantees.storable import unstorable_reason

ApprovalPolicy = Literal["always", "first", "never"]
MAX_REPLANS = 30
"""Most revisions a run may make: each costs at most 6 of a run's 200 LangGraph steps."""


class InvalidContextError(ConfigurationError):
    """A run's context has a wrong value; the message names every wrong field."""


def _storable(text: str) -> str:
    reason = unstorable_reason(text)
    if reason is not None:
        raise ValueError(reason.removeprefix("the value "))
    return text


Text = Annotated[StrictStr, Field(min_length=1), AfterValidator(_storable)]
Count = Annotated[StrictInt, Field(ge=0)]
Positive = Annotated[StrictInt, Field(ge=1)]
Seconds = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]  # an int is a float too


class Price(TypedDict):
    """A model's price in US dollars per million tokens, in and out."""

    input: Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]
    output: Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]


Model = Annotated[Text, {"__template_metadata__": {"kind": "llm"}}]
"""A model spec, marked as a model the way LangGraph's templates mark theirs for Studio."""

Limit = Annotated[StrictFloat, Field(gt=0, le=86_400, allow_inf_nan=False)]


@with_config(ConfigDict(extra="forbid"))
class ModelTimeouts(TypedDict, total=False):
    """A role's model call limits in seconds; a limit left out takes its default.

    ``connect``: to open a connection (clients that take it: OpenAI-compatible ones);
    ``idle``: the longest wait for the next part of a streamed reply (keep-alive comments do
    not count), and the client's read timeout; ``total``: the whole call, retries included.
    """

    connect: Limit
    idle: Limit
    total: Limit


DEFAULT_TIMEOUTS: ModelTimeouts = {"connect": 10.0, "idle": 120.0, "total": 300.0}
"""Model call limits unless a run or ``$PLANEXEC_MODEL_<LIMIT>_TIMEOUT`` says otherwise."""

Timeouts = Annotated[ModelTimeouts, Field(json_schema_extra={"default": dict(DEFAULT_TIMEOUTS)})]
"""A role's limits, their built-in defaults shown in Studio's form."""

_TIMEOUTS_HELP = (
    "Seconds a {role} model call may take: connect (opening a connection), idle (waiting for "
    "the next part of a streamed reply), total (the whole call, retries included). Left out: "
    "$PLANEXEC_MODEL_CONNECT_TIMEOUT / _IDLE_ / _TOTAL_, else 10 / 120 / 300."
)


@dataclass(kw_only=True)
class Context:
    """Settings of one run, passed as ``graph.invoke(..., context=Context(...))``.

    Model names are ``"openai:MODEL"`` (any OpenAI-compatible endpoint through
    ``OPENAI_BASE_URL``) or ``"scripted:PATH"`` (a recorded reply file, for offline runs).
    Every value is checked when the context is made (:func:`check_context`).
    """

    planner_model: Model = field(
        default="openai:gpt-4.1",
        metadata={
            "description": "Model that writes and revises plans (a strong one). "
            "Unset: $PLANEXEC_PLANNER_MODEL, else this default."
        },
    )
    executor_model: Model = field(
        default="openai:gpt-4.1-mini",
        metadata={
            "description": "Model that carries out steps with no tool (a cheap one). "
            "Unset: $PLANEXEC_EXECUTOR_MODEL, else this default."
        },
    )
    evaluator_model: Model = field(
        default="openai:gpt-4.1-mini",
        metadata={
            "description": "Model of the optional LLM judge. "
            "Unset: $PLANEXEC_EVALUATOR_MODEL, else this default."
        },
    )
    llm_judge: StrictBool = field(
        default=False,
        metadata={"description": "Ask the evaluator model to judge results (one call a round)."},
    )
    approval: ApprovalPolicy = field(
        default="first",
        metadata={
            "description": "Which plans need human approval: always (every revision), first "
            "(the first plan, and revisions that add a side-effecting tool), never."
        },
    )
    workspace: str | None = field(
        default=None,
        metadata={
            "description": "Name of a shared folder below the operator's workspace root "
            "(e.g. 'sales' or 'team/sales': letters, digits, '.', '_', '-'), the only files the "
            "tools may read and write. Unset: a folder of this thread's own."
        },
    )
    max_steps: Positive = field(default=30, metadata={"description": "Most steps a plan may have."})
    max_plan_repairs: Count = field(
        default=2, metadata={"description": "Times an invalid plan goes back to the planner."}
    )
    max_replans: Annotated[Count, Field(le=MAX_REPLANS)] = field(
        default=2, metadata={"description": f"Most plan revisions a run (0-{MAX_REPLANS})."}
    )
    max_parallel_steps: Positive = field(  # 8: no slower than unlimited on 30-step DAGs
        default=8,
        metadata={
            "description": "Most steps running at the same time (tool calls, model calls); "
            "free slots go to the step with the longest chain of dependents."
        },
    )
    step_timeout: Annotated[Seconds, Field(gt=0)] = field(
        default=120.0, metadata={"description": "Seconds one attempt of a step may take."}
    )
    step_max_attempts: Positive = field(
        default=3, metadata={"description": "Attempts of a step failing with transient errors."}
    )
    max_abandoned_calls: Positive = field(
        default=4,
        metadata={
            "description": "Tool calls that timed out but still run (abandoned) in this process "
            "at which no new tool call starts."
        },
    )
    retry_initial_interval: Seconds = field(
        default=0.5, metadata={"description": "Seconds before the first retry of a step."}
    )
    retry_backoff_factor: Annotated[Seconds, Field(ge=1)] = field(
        default=2.0, metadata={"description": "Each retry waits this many times longer."}
    )
    max_executor_turns: Positive = field(
        default=6, metadata={"description": "Model turns of a step that has no tool."}
    )
    plan_memory: StrictBool | None = field(
        default=None,
        metadata={
            "description": "Reuse the approved plans of similar tasks (kept in the graph's "
            "store, when it has one) and keep this run's plan when it succeeds. Off: memory is "
            "neither read nor written. Unset: $PLANEXEC_PLAN_MEMORY (on/off), else on."
        },
    )
    max_tokens: Count | None = field(
        default=None,
        metadata={
            "description": "Most model tokens (in + out) a run may spend; then no new model "
            "call or step starts and the run ends with what it has. Unset: no limit."
        },
    )
    max_cost: Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)] | None = field(
        default=None,
        metadata={
            "description": "Most model cost (USD) a run may spend, priced by model_prices; "
            "then no new model call or step starts. Unset: no limit."
        },
    )
    max_seconds: Annotated[Seconds, Field(gt=0)] | None = field(
        default=None,
        metadata={
            "description": "Most working time (seconds) a run may take, not counting waits "
            "for a human; then no new model call or step starts. Unset: no limit."
        },
    )
    model_prices: dict[Text, Price] | None = field(
        default=None,
        metadata={
            "description": 'USD per million tokens by model spec, e.g. {"openai:gpt-4.1": '
            '{"input": 2.0, "output": 8.0}}; over planexec\'s table of common models.'
        },
    )
    inline_output_limit: Count = field(
        default=4096,
        metadata={"description": "Bytes of a step output kept in state; larger go to a file."},
    )
    planner_timeouts: Timeouts = field(
        default_factory=lambda: ModelTimeouts(),
        metadata={"description": _TIMEOUTS_HELP.format(role="planner (and replanner)")},
    )
    executor_timeouts: Timeouts = field(
        default_factory=lambda: ModelTimeouts(),
        metadata={"description": _TIMEOUTS_HELP.format(role="executor")},
    )
    evaluator_timeouts: Timeouts = field(
        default_factory=lambda: ModelTimeouts(),
        metadata={"description": _TIMEOUTS_HELP.format(role="judge (evaluator)")},
    )

    def __post_init__(self) -> None:
        """Take model defaults from the environment; refuse wrong values now (before a run)."""
        for f in dataclasses.fields(self):
            if f.name.endswith("_model") and getattr(self, f.name) == f.default:
                setattr(self, f.name, os.environ.get(f"PLANEXEC_{f.name.upper()}", f.default))
        if self.plan_memory is None:
            setting = os.environ.get("PLANEXEC_PLAN_MEMORY", "on").strip().lower()
            self.plan_memory = setting not in {"off", "0", "false", "no"}
        check_context(self)  # the limits given, before they are merged with the defaults
        defaults = _default_timeouts()
        for name in ("planner_timeouts", "executor_timeouts", "evaluator_timeouts"):
            given = getattr(self, name)  # a built-in default sent back (Studio's form) is unset
            kept = {k: v for k, v in given.items() if v != DEFAULT_TIMEOUTS.get(k)}
            setattr(self, name, {**defaults, **kept})
        check_context(self)
        if self.max_cost is not None:
            from planexec.guarantees.budget import unpriced_models

            unpriced = unpriced_models(self)
            if unpriced:
                raise InvalidContextError(
                    f"invalid context: max_cost: no price for {', '.join(unpriced)}: add it to "
                    'model_prices (USD per million tokens, {"input": ..., "output": ...})'
                )


def _default_timeouts() -> ModelTimeouts:
    """Return the model call limits a run gets where it sets none (environment, else built-in)."""
    limits = dict(DEFAULT_TIMEOUTS)
    for name in limits:
        setting = os.environ.get(f"PLANEXEC_MODEL_{name.upper()}_TIMEOUT", "").strip()
        if setting:
            try:
                limits[name] = float(setting)
            except ValueError:
                raise InvalidContextError(
                    f"PLANEXEC_MODEL_{name.upper()}_TIMEOUT={setting!r} is not a number of seconds"
                ) from None
    return cast(ModelTimeouts, limits)


@cache
def _checker() -> type[_BaseModel]:
    """Build (once) a strict pydantic model with Context's fields, types and ranges."""
    hints = get_type_hints(Context, include_extras=True)
    fields: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(Context)}
    return create_model(
        "ContextCheck", __config__=ConfigDict(strict=True, extra="forbid"), **fields
    )


def check_context(context: object) -> None:
    """Raise :class:`InvalidContextError` naming every field of ``context`` that is wrong."""
    if not isinstance(context, Context):
        raise InvalidContextError(
            f"invalid context: expected a planexec Context or a dict of its fields, "
            f"not a {type(context).__name__}"
        )
    values = {f.name: getattr(context, f.name) for f in dataclasses.fields(Context)}
    try:
        _checker().model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            name = ".".join(str(p) for p in err["loc"][:1])
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{name}: {message} (got {err['input']!r:.60})")
        raise InvalidContextError("invalid context: " + "; ".join(problems)) from None


def context_of(runtime_context: Context | None) -> Context:
    """Return the run's context (checked again: it may have changed since it was made).

    With no context, the defaults.
    """
    if runtime_context is None:
        return Context()
    check_context(runtime_context)
    return runtime_context
