"""The shapes of a recording's files, and their checking when read.

``DIR/steps/<tool>/<sha>.json`` (:class:`ToolRecord`): ``{"tool", "args", "output"}``, or
``{"tool", "args", "error": {"message", "transient"}}`` for a recorded failure; ``"changed"``
lists the arguments changed to be kept, if any.
``DIR/models/<role>/<sha>.json`` (:class:`ModelRecord`): ``{"role", "model", "asked",
"reply"}``. ``<sha>`` is the SHA-256 of the call's key (:mod:`planexec.recording.files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from planexec.recording.files import RecordingError

_STRICT = ConfigDict(extra="forbid", strict=True)


@with_config(_STRICT)
class FailureDoc(TypedDict):
    """A tool call's recorded failure: its message as the step reported it, scrubbed."""

    message: str
    transient: bool
    """Whether it may pass on its own (a replayed step attempts it again, as recorded)."""


@with_config(_STRICT)
class ToolRecord(TypedDict):
    """One tool call: its tool, its resolved arguments, and its output (or failure)."""

    tool: str
    args: dict[str, Any]
    output: NotRequired[Any]
    error: NotRequired[FailureDoc]
    changed: NotRequired[list[str]]
    """The argument paths whose value was changed to be kept (a secret replaced, a huge integer
    made text, a NUL, a NaN): a call matches only with the same changes
    (:mod:`planexec.recording.arguments`)."""


@with_config(_STRICT)
class ModelRecord(TypedDict):
    """One model call: whose, which model, the end of what was asked, and the reply."""

    role: str
    model: dict[str, Any]
    """The model's identity: its class, its settings (scrubbed), its endpoint, or its script."""
    asked: str
    """The last message of the request (cut), for a reviewer: the key hashes all of it."""
    reply: dict[str, Any]
    """The reply as LangChain serialises a message (``message_to_dict``)."""


_TOOL = TypeAdapter(ToolRecord)
_MODEL = TypeAdapter(ModelRecord)


def _problem(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'the file'}: {e['msg']}"
        for e in exc.errors(include_url=False, include_input=False)[:3]
    )


def tool_record(data: Any, path: Path) -> ToolRecord:
    """Return ``data`` as a tool record, or raise naming ``path`` and what is wrong."""
    try:
        record = _TOOL.validate_python(data)
    except ValidationError as exc:
        raise RecordingError(f"recording {path} is not a recording of a tool call: "
                             f"{_problem(exc)}") from None  # fmt: skip
    if ("output" in record) == ("error" in record):
        raise RecordingError(
            f"recording {path} is not a recording of a tool call: it needs exactly one of "
            "output and error"
        )
    return record


def model_record(data: Any, path: Path) -> ModelRecord:
    """Return ``data`` as a model record, or raise naming ``path`` and what is wrong."""
    try:
        return _MODEL.validate_python(data)
    except ValidationError as exc:
        raise RecordingError(f"recording {path} is not a recording of a model call: "
                             f"{_problem(exc)}") from None  # fmt: skip
