"""Judging step results against what the steps were meant to produce.

Cheap checks need no model (:func:`cheap_problem`): a result must not be empty, and the files
its tool declares in its output must lie in the workspace and exist (in a replay,
:mod:`planexec.recording`, where a replayed tool wrote no file, they need only lie in it).
The optional LLM judge (:func:`judge`) sees every newly finished step of a round in one call
and answers with structured :class:`Verdicts`. A
judge's reply that is not verdicts, or did not end normally (cut off, filtered, refused), gives
none: the results stand on the cheap checks, and the evaluation's reason says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from planexec.errors import IncompleteReplyError, WorkspaceError
from planexec.llm import prompts
from planexec.recording import recording_in_use
from planexec.redaction.secrets import redact
from planexec.state import StepDoc
from planexec.storage.outputs import summarize
from planexec.tools.workspace import Workspace

NOT_UNDERSTOOD = "the judge's reply was not understood; results accepted on cheap checks"
"""The note added to the evaluation's reason when the judge's reply is not :class:`Verdicts`."""


class Verdict(BaseModel):
    """The judge's view of one step's result."""

    step: int
    ok: bool
    reason: str = ""


class Verdicts(BaseModel):
    """The judge's verdicts on every step shown to it."""

    verdicts: list[Verdict] = Field(default_factory=list)


@dataclass(frozen=True)
class Judgement:
    """The verdicts on the steps shown (by step id), and a note when the reply was unusable."""

    verdicts: dict[int, Verdict]
    note: str = ""


def cheap_problem(output: Any, file_fields: Sequence[str], workspace: Workspace) -> str | None:
    """Return why an output cannot be right without asking a model, or None.

    An empty output is a problem; so is a file the tool's declared ``file_fields`` name (text,
    or a list of text) that is not in the workspace (in a replay: that lies outside it). No
    other field is taken for a file.
    """
    if output is None or (isinstance(output, str | dict | list) and not output):
        return "the step produced no output"
    if not file_fields or not isinstance(output, dict):
        return None
    replaying = _replaying()  # a replayed tool wrote no file: only where it lies is checked
    for key in file_fields:
        value = output.get(key)
        paths = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for path in paths:
            problem = (
                _missing_file(path, workspace, must_exist=not replaying)
                if isinstance(path, str) and path
                else None
            )
            if problem:
                return f"its output names {_short(path)}{problem}"
    return None


def _replaying() -> bool:
    recording = recording_in_use()
    return recording is not None and recording.replaying


_WORKSPACE_HINT = (
    " (a tool writes its files into the run's workspace through "
    "planexec.tools.current_workspace(); a relative path opened directly lands in the "
    "process's current folder instead)"
)


def _missing_file(path: str, workspace: Workspace, *, must_exist: bool = True) -> str | None:
    try:
        resolved = workspace.resolve(path)  # outside the workspace: refused, replayed or not
        if must_exist and not resolved.exists():
            return f", which does not exist in the workspace{_WORKSPACE_HINT}"
    except (WorkspaceError, OSError, ValueError) as exc:  # e.g. ENAMETOOLONG, a NUL
        return f": {exc}"
    return None


def _short(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def judge_messages(steps: list[StepDoc], outputs: dict[int, Any]) -> list[BaseMessage]:
    """Build the judge's prompt: each shown step's purpose and (summarised) result, redacted.

    Redacted here because the structured-output chain reports its input to callbacks before
    the model scrubs it.
    """
    by_id = {s["id"]: s for s in steps}
    shown = [
        {
            "step": i,
            "description": by_id[i]["description"],
            "expected_output": by_id[i]["expected_output"],
            "result": summarize(output, 2000),
        }
        for i, output in outputs.items()
    ]
    messages: list[BaseMessage] = [
        SystemMessage(prompts.JUDGE_SYSTEM),
        HumanMessage(json.dumps(shown, indent=1)),
    ]
    return cast(list[BaseMessage], redact(messages))


def judgement_of(reply: Any, outputs: dict[int, Any]) -> Judgement:
    """Read the judge's reply (the structured-output chain's ``include_raw`` dict).

    Verdicts on steps not shown are dropped; an unusable reply gives none, and a note saying so.
    """
    parsed = reply.get("parsed") if isinstance(reply, dict) else None
    if not isinstance(parsed, Verdicts):
        return Judgement(verdicts={}, note=NOT_UNDERSTOOD)
    return Judgement(verdicts={v.step: v for v in parsed.verdicts if v.step in outputs})


async def judge(
    model: BaseChatModel,
    steps: list[StepDoc],
    outputs: dict[int, Any],
    config: RunnableConfig | None = None,
) -> Judgement:
    """Ask the judge, in one call, whether each output fits what its step expected."""
    structured = model.with_structured_output(Verdicts, include_raw=True)
    try:
        reply = await structured.ainvoke(judge_messages(steps, outputs), config)
    except IncompleteReplyError as exc:
        return Judgement(verdicts={}, note=f"{exc}; results accepted on cheap checks")
    return judgement_of(reply, outputs)
