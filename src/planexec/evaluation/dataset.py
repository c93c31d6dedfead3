"""Evaluation datasets: JSONL files (one example a line) or LangSmith datasets, checked up front.

Each example has ``inputs`` (``task``; ``data``: files copied into the run's workspace;
``context``: fields of :class:`planexec.Context`) and ``outputs`` (the expectations:
``tools`` or a ``trajectory``, ``facts`` the answer must contain, the final ``status``, and
limits ``max_steps``, ``max_model_calls``, ``max_tokens``, ``max_cost``, ``max_seconds``), and
optionally an ``id`` and ``metadata``. Every line is checked before anything runs: a bad one
is one :class:`DatasetError` naming the file, the line and the field.

Data files are read where the dataset's author put them, never anywhere else: a relative path
inside the dataset file's folder (links resolved: a link out of it is refused), or
``planexec:demo/NAME`` for the data planexec ships. Absolute paths and ``..`` out of the folder
are refused: a dataset someone sends you cannot make a run read your other files. A LangSmith
dataset has no folder: its examples may name only ``planexec:demo/NAME``, unless the operator
gives one (``data_dir``, the CLI's ``--data-dir DIR``), where relative paths are then checked
the same way.

A JSONL file is read as UTF-8 (a leading byte order mark is skipped) and split at a newline
only (a carriage return before it is dropped), so a string holding U+2028 or U+0085 stays one line.
Every example's values are nested at most :data:`MAX_DEPTH` deep, and a LangSmith example is
at most :data:`MAX_LINE_CHARS` characters as JSON, checked at load.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from planexec.context import context_problems
from planexec.errors import PlanexecError

MAX_LINE_CHARS = 1_000_000
"""Longest line a JSONL dataset may have (one example; a LangSmith example as JSON)."""
MAX_DEPTH = 64
"""Deepest nesting of lists and objects an example may have (its own object is depth 1)."""
MAX_EXAMPLES = 10_000
"""Most examples a dataset may have."""
MAX_DATASET_BYTES = 64 * 2**20
"""Largest JSONL dataset file read."""
PACKAGE_DATA = "planexec:demo/"
"""Prefix of a data file shipped with planexec (``planexec:demo/sales.csv``)."""
EVAL_CHOSEN = {
    "approval": "eval approves every plan by policy (approval never)",
    "shared_folder": "each example runs in a workspace of its own",
    "plan_memory": "eval plans afresh; --memory turns plan memory on for the whole evaluation",
    "model_prices": "prices are the operator's setting (their configuration), not a dataset's",
}
"""Context fields an example may not set, and why (the evaluation decides them)."""

MatchMode = Literal["strict", "unordered", "subset", "superset"]
FinalStatus = Literal["succeeded", "partial", "failed", "cancelled"]
Text = Annotated[StrictStr, Field(min_length=1, max_length=100_000)]
Limit = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, strict=True)]


class DatasetError(PlanexecError):
    """A dataset cannot be read or has a bad example: one line naming where and what."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ExpectedCall(_Strict):
    """One expected tool call: its name as the planner sees it, and the arguments that matter.

    ``args`` given: the executed call must have these (others may differ); left out: any.
    """

    tool: Text
    args: dict[str, Any] | None = None


class Trajectory(_Strict):
    """The tool calls a run is expected to make, compared in one of agentevals' modes.

    ``strict``: the same calls in the same order; ``unordered``: the same calls in any order;
    ``subset``: no call outside these; ``superset``: at least these. Repeats count: each
    expected call matches one executed call, so a call that ran twice must be expected twice
    (``unordered``, ``subset``), and one expected twice must have run twice (``superset``).
    """

    steps: list[ExpectedCall | Text] = Field(max_length=1000)
    match: MatchMode = "strict"

    def calls(self) -> list[ExpectedCall]:
        """Return the steps as expected calls (a bare name: any arguments)."""
        return [s if isinstance(s, ExpectedCall) else ExpectedCall(tool=s) for s in self.steps]


class Expectations(_Strict):
    """An example's ``outputs``: what its run should do (anything left out is not checked).

    ``tools``: the first plan's tools, in plan order (names only, matched strictly);
    ``trajectory``: the tool steps that ran, in the order they started, matched in its mode;
    ``status`` defaults to ``succeeded``.
    """

    tools: list[Text] | None = Field(default=None, max_length=1000)
    trajectory: Trajectory | None = None
    facts: list[Text] = Field(default_factory=list, max_length=1000)
    status: FinalStatus = "succeeded"
    max_steps: Count | None = None
    max_model_calls: Count | None = None
    max_tokens: Count | None = None
    max_cost: Limit | None = None
    max_seconds: Limit | None = None

    @model_validator(mode="after")
    def _one_trajectory(self) -> Expectations:
        if self.tools is not None and self.trajectory is not None:
            raise ValueError("give tools or trajectory, not both")
        return self


class Inputs(_Strict):
    """An example's ``inputs``: the task, data files, and run context fields."""

    task: Text
    data: list[Text] = Field(default_factory=list, max_length=100)
    context: dict[str, Any] = Field(default_factory=dict)

    @field_validator("context")
    @classmethod
    def _context_fits(cls, context: dict[str, Any]) -> dict[str, Any]:
        for name, why in EVAL_CHOSEN.items():
            if name in context:
                raise ValueError(f"{name} cannot be set: {why}")
        problems = context_problems(context)
        if problems:
            raise ValueError("; ".join(problems[:3]))
        return context


class ExampleLine(_Strict):
    """One line of a JSONL dataset, as written."""

    id: Annotated[StrictStr, Field(min_length=1, max_length=200)] | None = None
    inputs: Inputs
    outputs: Expectations = Field(default_factory=Expectations)
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class EvalExample:
    """A checked example: its id, inputs, expectations, and its data files, found."""

    id: str
    inputs: Inputs
    outputs: Expectations
    data: list[Path]
    metadata: Mapping[str, Any]
    named: bool = True
    """Whether the dataset gave the id (else it is the line's number, which moves)."""

    def inputs_dict(self) -> dict[str, Any]:
        """Return the inputs as ``langsmith.evaluate`` passes them to the target.

        ``id``, when the dataset gave one, names the example's recording (``Recording.part``)
        in :class:`EvalTarget`; a line's number does not (lines move): the inputs name it.
        """
        given = {"id": self.id} if self.named else {}
        return {**given, "task": self.inputs.task, "data": [str(p) for p in self.data],
                "context": dict(self.inputs.context)}  # fmt: skip

    def outputs_dict(self) -> dict[str, Any]:
        """Return the expectations as ``langsmith.evaluate`` passes them to evaluators."""
        return self.outputs.model_dump(mode="json", exclude_none=True)


def load_dataset(path: str | Path) -> list[EvalExample]:
    """Read and check a JSONL dataset; raise :class:`DatasetError` at its first bad line."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_DATASET_BYTES:
            raise DatasetError(f"dataset {path} is larger than {MAX_DATASET_BYTES // 2**20} MB")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read dataset {path}: {_reason(exc)}") from None
    folder = path.resolve().parent
    examples: list[EvalExample] = []
    seen: dict[str, int] = {}
    for number, line in enumerate((x.removesuffix("\r") for x in text.split("\n")), start=1):
        if not line.strip():
            continue
        if len(examples) >= MAX_EXAMPLES:
            raise DatasetError(f"dataset {path} has more than {MAX_EXAMPLES} examples")
        found = _example(_parsed(line, path, number), path, number, folder)
        if found.id in seen:
            raise DatasetError(
                f"dataset {path}, line {number}: id: {found.id!r} is already the id of line "
                f"{seen[found.id]}"
            )
        seen[found.id] = number
        examples.append(found)
    if not examples:
        raise DatasetError(f"dataset {path} has no examples (one JSON object a line)")
    return examples


Row = tuple[str, Mapping[str, Any], Mapping[str, Any] | None, Mapping[str, Any]]
"""An example from elsewhere: its id, inputs, outputs and metadata."""


def examples_of(rows: Iterable[Row], where: str, data_dir: Path | None = None) -> list[EvalExample]:
    """Check examples given as ``(id, inputs, outputs, metadata)`` (a LangSmith dataset's).

    Data files: ``planexec:demo/NAME``, or relative to ``data_dir`` (and inside it) when given.
    """
    folder = data_dir.resolve() if data_dir is not None else None
    examples = []
    for number, (ident, inputs, outputs, metadata) in enumerate(rows, start=1):
        if number > MAX_EXAMPLES:
            raise DatasetError(f"{where} has more than {MAX_EXAMPLES} examples")
        line = {"id": ident, "inputs": dict(inputs or {}), "outputs": dict(outputs or {}),
                "metadata": dict(metadata)}  # fmt: skip
        problem = _too_big(line)
        if problem:
            raise DatasetError(f"{where}, example {number}: {problem}")
        examples.append(_example(line, where, number, folder, what="example"))
    if not examples:
        raise DatasetError(f"{where} has no examples")
    return examples


def _parsed(line: str, path: Path, number: int) -> object:
    where = f"dataset {path}, line {number}"
    if len(line) > MAX_LINE_CHARS:
        raise DatasetError(f"{where}: longer than {MAX_LINE_CHARS:,} characters")
    try:
        return json.loads(line)
    except RecursionError:
        raise DatasetError(f"{where}: nested too deeply") from None
    except ValueError as exc:
        raise DatasetError(f"{where}: not valid JSON ({_reason(exc)})") from None


def _too_big(line: Mapping[str, Any]) -> str | None:
    """Say why a LangSmith example is too big or deep to take, or None."""
    problem = _too_deep(line)
    if problem is None and len(json.dumps(line, default=str)) > MAX_LINE_CHARS:
        problem = f"longer than {MAX_LINE_CHARS:,} characters as JSON"
    return problem


def _too_deep(data: object) -> str | None:
    """Say where ``data`` nests deeper than :data:`MAX_DEPTH`, or None (no recursion used)."""
    stack: list[tuple[object, int, str]] = [(data, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            return f"{where.lstrip('.') or 'the example'}: nested more than {MAX_DEPTH} deep"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        top = where.count(".") < 3  # name the field, not the path down to the depth
        stack.extend((v, depth + 1, f"{where}.{k}" if top else where) for k, v in items)
    return None


def _example(
    data: object, path: str | Path, number: int, folder: Path | None, what: str = "line"
) -> EvalExample:
    where = f"dataset {path}, {what} {number}"
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: an example is a JSON object, not {type(data).__name__}")
    deep = _too_deep(data)
    if deep:
        raise DatasetError(f"{where}: {deep}")
    try:
        line = ExampleLine.model_validate(data)
    except ValidationError as exc:
        raise DatasetError(f"{where}: {_first_error(exc)}") from None
    except RecursionError:
        raise DatasetError(f"{where}: nested too deeply") from None
    files = []
    for index, name in enumerate(line.inputs.data):
        try:
            files.append(data_file(name, folder))
        except ValueError as exc:
            raise DatasetError(f"{where}: inputs.data.{index}: {exc}") from None
    ident = line.id if line.id is not None else str(number)
    return EvalExample(ident, line.inputs, line.outputs, files, line.metadata, line.id is not None)


def data_file(name: str, folder: Path | None) -> Path:
    """Return the data file ``name`` names, or raise ValueError saying why it is refused.

    ``planexec:demo/NAME``: a file planexec ships; else a relative path inside ``folder``
    (None: a LangSmith dataset's, with no folder given: only ``planexec:demo/NAME``).
    """
    if name.startswith(PACKAGE_DATA):
        base = Path(str(resources.files("planexec") / "demo")).resolve()
        relative = name.removeprefix(PACKAGE_DATA)
    elif folder is None:
        raise ValueError(
            f"{name!r}: a LangSmith dataset's data files are {PACKAGE_DATA}NAME, or paths "
            "inside a folder the operator gives (--data-dir DIR)"
        )
    else:
        base, relative = folder, name
    if Path(relative).is_absolute() or relative.startswith(("~", "\\")):
        raise ValueError(f"{name!r}: give a path relative to the dataset's folder")
    found = (base / relative).resolve()
    if not found.is_relative_to(base):
        raise ValueError(f"{name!r} is outside the dataset's folder {base} (links resolved)")
    if not found.is_file():
        raise ValueError(f"{name!r} is not a file in {base}")
    return found


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {message}{more}"[:500] if loc else f"{message}{more}"[:500]


def _reason(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def langsmith_dataset(
    name: str, client: Any = None, data_dir: str | Path | None = None
) -> list[EvalExample]:
    """Read and check the examples of the LangSmith dataset ``name`` (``list_examples``).

    ``client``: a ``langsmith.Client`` (default: the environment's, ``LANGSMITH_API_KEY``).
    ``data_dir``: the folder the examples' relative data paths are in (default: none, so only
    ``planexec:demo/NAME`` files): a shared dataset cannot make a run read your files.
    """
    from langsmith import Client
    from langsmith.utils import LangSmithError

    reader = client if client is not None else Client()
    where = f"LangSmith dataset {name!r}"
    try:
        rows: list[Row] = [
            (str(e.id), e.inputs or {}, e.outputs, {"langsmith_dataset_id": str(e.dataset_id)})
            for e in itertools.islice(reader.list_examples(dataset_name=name), MAX_EXAMPLES + 1)
        ]
    except (LangSmithError, OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {where}: {_reason(exc)}") from None
    return examples_of(rows, where, Path(data_dir) if data_dir is not None else None)
