"""Run-time configuration: models, limits and policies, editable per assistant in Studio.

A :class:`Context` checks its values when it is made, in one place
(:func:`context_problems`): LangGraph makes it from the ``context`` dict of a run (the
LangGraph server passes the assistant's and the run's context that way) before anything is
stored, so a wrong value or an unknown field refuses the run up front with one
:class:`InvalidContextError` naming every wrong field (``aproval: unknown field (did you mean
approval?)``), from ``Context(...)`` and a dict alike. Types are strict (``"30"`` is not an
integer, ``None`` is not a timeout); numbers must be in range and finite; a shared folder's
name follows :func:`shared_folder_parts`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, cast, get_args, get_type_hints

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
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict, is_typeddict

from planexec.errors import ConfigurationError
from planexec.storage.storable import unstorable_reason

ApprovalPolicy = Literal["always", "first", "never"]
MAX_REPLANS = 30
"""Most revisions a run may make: each costs at most 6 of a run's 200 LangGraph steps."""


MAX_CONTEXT_KEYS = 200
"""Most keys a context may have (a run's, or a parent graph's): more is refused unread."""
MAX_NAMED_PROBLEMS = 10
"""Most wrong fields a refusal names; the rest are counted (``and 5 more``)."""
MAX_SHOWN_NAME = 60
"""Most characters of a key a refusal shows."""


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

MAX_SEGMENT_CHARS = 128
MAX_FOLDER_NAME_CHARS = 255
MAX_FOLDER_NAME_PARTS = 8
FOLDER_SEGMENT = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_SEGMENT_CHARS - 1}}}")
"""One part of a folder name: a shared folder's parts, a thread id that names its folder."""
FOLDER_RULE = (
    "letters, digits, '.', '_' and '-', not starting with '.' or '-', "
    f"at most {MAX_SEGMENT_CHARS} characters"
)


def shared_folder_parts(name: str) -> tuple[str, ...]:
    """Return the parts of a shared folder's name, or raise ValueError saying why not.

    A name is one or more parts joined by ``/`` (``sales`` or ``team/sales``), each made of
    letters, digits, ``.``, ``_`` and ``-`` and not starting with ``.`` or ``-``: no absolute
    paths, no ``..``, no empty parts, no backslashes, nothing hidden.
    """
    if not name.strip():
        raise ValueError(
            "the name is empty: give a folder name such as 'sales', or leave it unset for a "
            "folder of the thread's own"
        )
    if len(name) > MAX_FOLDER_NAME_CHARS:
        raise ValueError(f"the name is longer than {MAX_FOLDER_NAME_CHARS} characters")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise ValueError(
            "absolute paths are not accepted: a shared folder is a name below the operator's "
            "workspace root, such as 'sales'"
        )
    parts = tuple(name.split("/"))
    if ".." in parts:
        raise ValueError("'..' is not accepted in a folder name")
    if len(parts) > MAX_FOLDER_NAME_PARTS:
        raise ValueError(f"at most {MAX_FOLDER_NAME_PARTS} parts")
    for part in parts:
        if not FOLDER_SEGMENT.fullmatch(part):
            empty = " (and not empty)" if not part else ""
            raise ValueError(f"each part of a folder name must be {FOLDER_RULE}{empty}")
    return parts


def _shared_folder(name: str) -> str:
    shared_folder_parts(name)
    return name


SharedFolder = Annotated[StrictStr, AfterValidator(_shared_folder)]
"""The name of a shared folder below the operator's workspace root (checked when it is given)."""


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


RENAMED_FIELDS = {
    "workspace": "a run's workspace is chosen by whoever runs planexec: "
    "build_graph(workspace=PATH), planexec run --workspace PATH; a run may name a shared folder "
    "below the workspace root with shared_folder",
}
"""Hints for fields a run's context no longer has, by their old name."""

_C = TypeVar("_C")


def _refusing_unknown_fields(cls: type[_C]) -> type[_C]:
    """Make ``cls(...)`` refuse unknown keyword arguments with one :class:`InvalidContextError`.

    The dataclass's own ``__init__`` would raise a ``TypeError`` naming the first one only; this
    one names every unknown field (with the field it most likely meant) and every wrong value
    given with them. ``Context(...)`` keeps its signature, so type checkers still see the fields.
    """
    made_by_dataclass = cls.__init__
    names = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @functools.wraps(made_by_dataclass)
    def __init__(self: _C, **values: Any) -> None:
        if not values.keys() <= names:
            raise InvalidContextError(_refusal(context_problems(values)))
        made_by_dataclass(self, **values)

    setattr(cls, "__init__", __init__)  # noqa: B010  (mypy: no assignment to a method)
    return cls


@_refusing_unknown_fields
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
    approval: ApprovalPolicy | None = field(
        default=None,
        metadata={
            "description": "Which plans need human approval: always (every revision), first "
            "(the first plan, and revisions that add a side-effecting tool), never. Unset: the "
            "operator's policy (build_graph(approval=...), else $PLANEXEC_APPROVAL, else "
            "first); a run may ask for a stricter one, never a looser one."
        },
    )
    shared_folder: SharedFolder | None = field(
        default=None,
        metadata={
            "description": "Name of a shared folder below the operator's workspace root "
            "(e.g. 'sales' or 'team/sales': letters, digits, '.', '_', '-'), the only files the "
            "tools may read and write. Unset: a folder of this thread's own. Refused by a "
            "graph whose operator gave it one folder (build_graph(workspace=PATH))."
        },
    )
    speculate: StrictBool = field(
        default=False,
        metadata={
            "description": "While the plan awaits approval, run its steps whose tools are "
            "declared free of side effects (and whose dependencies are such steps); an approved, "
            "unchanged step keeps its result. Only if the operator allows it "
            "(build_graph(speculate=...), else $PLANEXEC_SPECULATE); off by default."
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
            from planexec.spending.budget import unpriced_models

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
    """Build (once) a strict pydantic model with Context's fields, types and ranges.

    Fields left out are not checked (so the values given to ``Context(...)`` can be checked
    alone); keys that are no field are refused.
    """
    hints = get_type_hints(Context, include_extras=True)
    fields: dict[str, Any] = {f.name: (hints[f.name], None) for f in dataclasses.fields(Context)}
    return create_model(
        "ContextCheck", __config__=ConfigDict(strict=True, extra="forbid"), **fields
    )


def context_problems(values: Mapping[str, object]) -> list[str]:
    """Return what is wrong with a context's ``values`` by field name: one line each, in order.

    An unknown name says which field it most likely meant (``aproval: unknown field (did you
    mean approval?)``), or what replaced it (:data:`RENAMED_FIELDS`); a wrong value says why,
    and what it was.
    """
    if len(values) > MAX_CONTEXT_KEYS:
        return [_too_many(len(values))]
    try:
        _checker().model_validate(dict(values))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        return [_problem(err, hint=i < MAX_NAMED_PROBLEMS) for i, err in enumerate(errors)]
    return []


def _too_many(count: int) -> str:
    return (
        f"it has {count:,} keys; a context has at most {MAX_CONTEXT_KEYS} (planexec's settings "
        f"are {len(dataclasses.fields(Context))} fields)"
    )


def context_from_dict(values: Mapping[Any, Any]) -> Context:
    """Make a :class:`Context` of a dict of its fields, as LangGraph does with a dict context.

    Refused with one :class:`InvalidContextError` naming every wrong field: unknown ones (with
    the field most likely meant), wrong values, and keys that are not text.
    """
    if len(values) > MAX_CONTEXT_KEYS:
        raise InvalidContextError(_refusal([_too_many(len(values))]))
    odd = [f"{shown(k)}: a field name must be text" for k in values if not isinstance(k, str)]
    if odd:
        named = {k: v for k, v in values.items() if isinstance(k, str)}
        raise InvalidContextError(_refusal(odd + context_problems(named)))
    return Context(**values)


def _problem(err: ErrorDetails, *, hint: bool) -> str:
    """Say one problem, naming the key by its whole path (``planner_timeouts.conect``)."""
    loc = [str(part) for part in err["loc"]]
    name = ".".join(loc)
    if err["type"] == "extra_forbidden":
        said = ""
        if hint:
            said = _hint(loc[0]) if len(loc) == 1 else _inner_hint(loc[0], loc[-1])
        return f"{shown_name(name)}: unknown field" + (f" ({said})" if said else "")
    message = err["msg"].removeprefix("Value error, ")
    return f"{shown_name(name)}: {message} (got {shown(err['input'])})"


def _hint(name: str) -> str:
    if name in RENAMED_FIELDS:
        return RENAMED_FIELDS[name]
    if len(name) > MAX_SHOWN_NAME:  # nothing that long is close to a field's name
        return ""
    meant = _same_name(name, _field_names()) or _close_name(name, _field_names(), cutoff=0.6)
    return f"did you mean {meant}?" if meant else ""


def _inner_hint(field_name: str, key: str) -> str:
    """Say which key of a field's settings (a timeout's, a price's) ``key`` most likely meant."""
    if len(key) > MAX_SHOWN_NAME:
        return ""
    names = _inner_names(field_name)
    meant = _same_name(key, names) or _close_name(key, names, cutoff=0.6)
    return f"did you mean {meant}?" if meant else ""


@cache
def _inner_names(field_name: str) -> tuple[str, ...]:
    """Return the keys of the TypedDicts inside a field's type (``connect``, ``idle``, ...)."""
    hint = get_type_hints(Context, include_extras=True).get(field_name)
    names: list[str] = []
    pending: list[Any] = [hint]
    while pending:
        kind = pending.pop()
        if is_typeddict(kind):
            names += [n for n in get_type_hints(kind) if n not in names]
        pending += [a for a in get_args(kind) if isinstance(a, type) or get_args(a)]
    return tuple(names)


def _words(name: str) -> tuple[str, ...]:
    """Split a name into lower-case words at separators and camelCase (``maxCost``: max, cost)."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return tuple(word for word in re.split(r"[^a-z0-9]+", snake) if word)


def _same_name(name: str, names: tuple[str, ...]) -> str | None:
    """Return the one of ``names`` that ``name`` is but for case and separators, if any."""
    joined = "".join(_words(name))
    return next((n for n in names if "".join(_words(n)) == joined and n != name), None)


def _close_name(name: str, names: tuple[str, ...], *, cutoff: float) -> str | None:
    """Return the one of ``names`` most like ``name`` (case aside), if one is ``cutoff`` alike."""
    close = difflib.get_close_matches(name.lower(), names, n=1, cutoff=cutoff)
    return close[0] if close else None


@cache
def _field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Context))


def _refusal(problems: list[str]) -> str:
    """Say what is wrong: the first :data:`MAX_NAMED_PROBLEMS` problems, then how many more."""
    named = problems[:MAX_NAMED_PROBLEMS]
    more = len(problems) - len(named)
    return "invalid context: " + "; ".join(named + ([f"and {more} more"] if more else []))


def _shortener() -> reprlib.Repr:
    short = reprlib.Repr()  # 3.12 takes these as arguments
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 3, 60, 60, 40
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = short.maxfrozenset = 4
    short.maxdeque = short.maxarray = 4
    return short


_SHORT = _shortener()


def shown(value: object) -> str:
    """Show a value in a refusal: its repr cut short (depth, items, characters), never whole."""
    return _SHORT.repr(value)


def shown_name(name: str) -> str:
    """Show a key in a refusal: the whole of it, or its first characters if it is long."""
    if len(name) <= MAX_SHOWN_NAME:
        return name
    return f"{name[: MAX_SHOWN_NAME - 3]}... ({len(name):,} characters)"


def _shown_names(names: list[str]) -> str:
    listed = [shown_name(n) for n in names[:MAX_NAMED_PROBLEMS]]
    more = len(names) - len(listed)
    return ", ".join(listed + ([f"and {more} more"] if more else []))


def check_context(context: object) -> None:
    """Raise :class:`InvalidContextError` naming every field of ``context`` that is wrong."""
    if not isinstance(context, Context):
        raise InvalidContextError(
            f"invalid context: expected a planexec Context or a dict of its fields, "
            f"not a {type(context).__name__}"
        )
    problems = context_problems(
        {f.name: getattr(context, f.name) for f in dataclasses.fields(Context)}
    )
    if problems:
        raise InvalidContextError(_refusal(problems))


PARENT_KEY = "planexec"
"""The field or key of a parent graph's context that holds planexec's settings."""

_ACCEPTED = (
    "a planexec Context or a dict of its fields (in a parent graph, a parent context with "
    "planexec's settings in a 'planexec' field or key: a Context, a dict of its fields, or None)"
)
_UNDER_PARENT_KEY = (
    f"a parent graph gives planexec's settings under a '{PARENT_KEY}' key "
    f"(a Context or a dict of its fields; None for the defaults, which also leaves the parent's "
    f"other keys to the parent)"
)
CLOSE_MATCH = 0.8
"""How alike (difflib's ratio, case aside) a parent context's key and one of planexec's names
must be for the key to be taken as a misspelling of it (``planexc``, ``approvall``)."""


def run_context(given: object) -> Context:
    """Return the settings of a run from the ``context=`` it was started with, checked.

    Accepted: None (the defaults), a :class:`Context`, a dict of its fields, or an object
    with planexec's settings in its ``planexec`` field. Anything else (a
    ``SimpleNamespace``, a dataclass or pydantic model of the caller's own) is an
    :class:`InvalidContextError` saying what is accepted: planexec would not read it. A run
    nested in a parent graph reads its parent's context with :func:`context_of` instead.
    """
    if isinstance(given, Mapping):
        return context_from_dict(given)
    if given is None or isinstance(given, Context) or hasattr(given, PARENT_KEY):
        return context_of(given)
    raise InvalidContextError(
        f"invalid context: expected {_ACCEPTED}, not a {type(given).__name__}"
    )


def context_of(runtime_context: object) -> Context:
    """Return a run's settings from the context LangGraph gives its nodes, checked again.

    Accepted, so planexec runs alone and inside a parent graph with its own context schema:

    - a :class:`Context` (checked again: it may have changed since it was made);
    - a dict of its fields (every key one of its fields);
    - a parent's context, an object or a dict, whose ``planexec`` field or key holds a
      :class:`Context`, a dict of its fields, or None (the defaults);
    - a parent's context with no ``planexec`` field or key, none of whose keys or fields is
      one of planexec's fields or seems meant for planexec (:func:`_refuse_misspellings`),
      and no context at all: the defaults.

    Anything else is an :class:`InvalidContextError` saying what is accepted; so is a parent's
    context that mixes planexec's fields with its own, or has a key seemingly meant for
    planexec (``PlanExec``, ``planexc``, ``approvall``, ``approval_policy``), or more than
    :data:`MAX_CONTEXT_KEYS`.
    """
    if runtime_context is None:
        return Context()
    if isinstance(runtime_context, Context):
        check_context(runtime_context)
        return runtime_context
    if isinstance(runtime_context, Mapping):
        if PARENT_KEY in runtime_context:
            _refuse_other_planexec_keys([str(k) for k in runtime_context])
            return _settings_in(runtime_context[PARENT_KEY])
        return _context_in_dict(runtime_context)
    if isinstance(runtime_context, str | bytes | int | float | list | tuple | set):
        raise InvalidContextError(
            f"invalid context: expected {_ACCEPTED}, not a {type(runtime_context).__name__}"
        )
    if hasattr(runtime_context, PARENT_KEY):
        _refuse_other_planexec_keys(_attribute_names(runtime_context))
        return _settings_in(getattr(runtime_context, PARENT_KEY))
    return _parents_own(runtime_context)


def _settings_in(value: object) -> Context:
    """Return planexec's settings given in a parent's ``planexec`` field (None: defaults)."""
    if value is None:
        return Context()
    if isinstance(value, Context):
        check_context(value)
        return value
    if isinstance(value, Mapping):
        return _from_fields(value)
    raise InvalidContextError(
        f"invalid context: {PARENT_KEY}: expected a planexec Context or a dict of its fields "
        f"(or None for the defaults), not a {type(value).__name__}"
    )


def _context_in_dict(values: Mapping[Any, Any]) -> Context:
    """Read a dict context with no ``planexec`` key: planexec's own fields, or a parent's."""
    if len(values) > MAX_CONTEXT_KEYS:
        raise InvalidContextError(_refusal([_too_many(len(values))]))
    names = set(_field_names()) | set(RENAMED_FIELDS)
    ours = sorted(str(k) for k in values if k in names)
    others = sorted(str(k) for k in values if k not in names)
    if not others:
        return _from_fields(values)
    if not ours:
        _refuse_misspellings(others)
        return Context()  # a parent's own context, with nothing for planexec: the defaults
    raise InvalidContextError(
        f"invalid context: it mixes planexec's fields ({', '.join(ours)}) with other keys "
        f"({_shown_names(others)}): a parent graph's context gives planexec's settings under a "
        f"'{PARENT_KEY}' key (a Context or a dict of its fields), e.g. "
        f"{{'{shown_name(others[0])}': ..., '{PARENT_KEY}': {{'{ours[0]}': ...}}}}"
    )


def _parents_own(context: object) -> Context:
    """Read a parent's context object with no ``planexec`` field: the defaults, if it is one."""
    names = _attribute_names(context)
    if len(names) > MAX_CONTEXT_KEYS:
        raise InvalidContextError(_refusal([_too_many(len(names))]))
    ours = sorted(n for n in names if n in _field_names() or n in RENAMED_FIELDS)
    if ours:
        raise InvalidContextError(
            f"invalid context: a {type(context).__name__} with planexec's fields "
            f"({', '.join(ours)}) as its own and no '{PARENT_KEY}' field: expected {_ACCEPTED}"
        )
    _refuse_misspellings(names)
    return Context()


def _attribute_names(context: object) -> list[str]:
    """Return the fields of a context object, each once.

    A dataclass's fields, a pydantic model's (and its extra ones), the ``__slots__`` of every
    class it inherits from, and its own attributes (``__dict__``).
    """
    names: dict[str, None] = {}
    if dataclasses.is_dataclass(context):
        names.update(dict.fromkeys(f.name for f in dataclasses.fields(context)))
    for fields in (
        getattr(type(context), "model_fields", None),
        getattr(context, "__pydantic_extra__", None),
        getattr(context, "__dict__", None),
    ):
        if isinstance(fields, Mapping):
            names.update(dict.fromkeys(str(name) for name in fields))
    for cls in type(context).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        slots = (slots,) if isinstance(slots, str) else slots
        if isinstance(slots, Iterable):
            names.update(dict.fromkeys(str(name) for name in slots))
    names.pop("__dict__", None)
    names.pop("__weakref__", None)
    return list(names)


def _like_planexec(name: str) -> bool:
    """Whether a key other than ``planexec`` is meant for it: containing it, or like it."""
    if name == PARENT_KEY or len(name) > MAX_SHOWN_NAME:
        return False
    return (
        PARENT_KEY in name.lower()
        or _close_name(name, (PARENT_KEY,), cutoff=CLOSE_MATCH) is not None
    )


def _like_a_field(name: str) -> str | None:
    """Return the field of :class:`Context` a parent's key was likely meant as, if any.

    A key is taken for a field when, case, separators and camelCase aside, it is the field's
    name (``MAX_STEPS``, ``maxCost``), is :data:`CLOSE_MATCH` alike (``approvall``), or starts
    or ends with the field's whole name as words of its own (``approval_policy``,
    ``my_max_steps``, ``maxStepsLimit``); ``max_retries``, ``approvals_queue``, ``model`` or
    ``timeout`` are none of these.
    """
    if len(name) > MAX_SHOWN_NAME:  # far longer than any of planexec's names: not like one
        return None
    fields = _field_names()
    meant = _same_name(name, fields) or _close_name(name, fields, cutoff=CLOSE_MATCH)
    if meant:
        return meant
    words = _words(name)
    for field_name in fields:
        wanted = tuple(field_name.split("_"))
        if len(words) > len(wanted) and wanted in (words[: len(wanted)], words[-len(wanted) :]):
            return field_name
    return None


def _refuse_other_planexec_keys(names: list[str]) -> None:
    """Refuse a parent's context with keys like ``planexec`` beside its ``planexec`` key."""
    misspelt = [f"{shown_name(n)}: did you mean {PARENT_KEY}?" for n in names if _like_planexec(n)]
    if misspelt:
        raise InvalidContextError(f"{_refusal(misspelt)}; {_UNDER_PARENT_KEY}")


def _refuse_misspellings(names: list[str]) -> None:
    """Refuse a parent's context with a key meant for planexec but not ``planexec``.

    Meant for planexec: a key containing ``planexec`` in any case (``PlanExec``,
    ``planexec_settings``) or like it (``planexc``), or one like a field of :class:`Context`
    (:func:`_like_a_field`). A parent that has such keys of its own gives planexec's settings
    under ``planexec`` (``None`` for the defaults): its other keys are then not read.
    """
    misspelt = []
    for name in names:
        meant = PARENT_KEY if _like_planexec(name) else _like_a_field(name)
        if meant:
            misspelt.append(f"{shown_name(name)}: did you mean {meant}?")
    if misspelt:
        raise InvalidContextError(f"{_refusal(misspelt)}; {_UNDER_PARENT_KEY}")


def _from_fields(values: Mapping[Any, Any]) -> Context:
    """Make a Context of a dict of its fields (unknown and wrong ones refused, each named)."""
    if len(values) > MAX_CONTEXT_KEYS:
        raise InvalidContextError(_refusal([_too_many(len(values))]))
    return Context(**{str(k): v for k, v in values.items()})
