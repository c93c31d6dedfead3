"""``Recording``: a folder of tool outputs and model replies, recorded or replayed."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, cast, get_args

from langchain_core.messages import BaseMessage

from planexec.errors import ConfigurationError, ToolError, TransientToolError
from planexec.recording import files
from planexec.recording.arguments import ToolCall, tool_call
from planexec.recording.files import RecordingError, safe_name, sorted_json
from planexec.recording.models import asked, reply_data, reply_of
from planexec.recording.nearest import nearest, said
from planexec.recording.shapes import (
    FailureDoc,
    ModelRecord,
    ToolRecord,
    model_record,
    tool_record,
)
from planexec.redaction.secrets import redact, secret_values
from planexec.storage.storable import UnstorableValueError, to_storable

Mode = Literal["record", "replay"]
MODES: tuple[str, ...] = get_args(Mode)


class NoRecordingError(ToolError):
    """A replayed call has no recording: its step fails (not attempted again)."""


class RecordedToolFailure(ToolError):
    """A tool call's failure, as recorded: replayed, it fails the step the same way."""


class RecordedTransientFailure(RecordedToolFailure, TransientToolError):
    """A recorded failure that may pass on its own: the step is attempted again, as recorded."""


class RecordingStats(TypedDict):
    """What a recording did so far (counted in this process)."""

    tool_calls_recorded: int
    tool_calls_replayed: int
    tool_calls_missing: int
    model_replies_recorded: int
    model_replies_replayed: int
    model_calls_live: int
    """Model calls made live while replaying with ``models=True``: no reply was recorded."""


class Recording:
    """A folder of tool outputs (and model replies) a run records to or replays from.

    ``mode="record"``: every tool call of a step (a tool step's, or an executor model's) is
    kept after it returns, as planexec returns it (scrubbed of secrets), keyed by the tool's
    name and its resolved arguments (typed JSON: ``1`` and ``True`` are two calls; an argument
    changed to be kept, a secret or a NaN, is marked: :mod:`planexec.recording.arguments`); a
    failure is kept too, unless the same call has a recorded output. ``mode="replay"``: a call
    is served from the folder without calling the tool (two files of one call are refused); a
    call with no recording fails its step, naming the arguments that differ from the nearest
    recording of its tool. ``models``: record model replies too, and in a replay serve them
    when one was recorded for the very same call and model (its settings, endpoint or script:
    :func:`planexec.llm.calls.model_identity`), else the model is called.

    Give it to :func:`planexec.build_graph` (``recording=``); it is the operator's choice, never
    a run's context. Files: ``folder/steps/<tool>/<sha>.json`` and
    ``folder/models/<role>/<sha>.json`` (:mod:`planexec.recording.shapes`).
    """

    def __init__(self, folder: str | os.PathLike[str], mode: Mode, *, models: bool = True) -> None:
        """Open ``folder`` to record into (made if absent) or to replay from (must exist)."""
        if mode not in MODES:
            raise ConfigurationError(f"recording mode {mode!r}: expected 'record' or 'replay'")
        path = Path(folder).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigurationError(f"recording folder {path} is not a folder")
        if mode == "replay" and not path.is_dir():
            raise ConfigurationError(f"recording folder {path} does not exist: nothing to replay")
        if mode == "record":
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigurationError(f"cannot make recording folder {path}: {exc}") from None
        self.folder = path.resolve()
        self.mode: Mode = mode
        self.models = models
        self._parent: Recording | None = None
        self._lock = threading.Lock()
        self._indexes: dict[Path, _Index] = {}  # a replay's tool folders, read once
        self._stats = RecordingStats(
            tool_calls_recorded=0,
            tool_calls_replayed=0,
            tool_calls_missing=0,
            model_replies_recorded=0,
            model_replies_replayed=0,
            model_calls_live=0,
        )

    def __repr__(self) -> str:
        """Name the folder and mode."""
        return f"Recording({str(self.folder)!r}, {self.mode!r}, models={self.models})"

    @property
    def recording(self) -> bool:
        """Whether calls are recorded (``mode="record"``)."""
        return self.mode == "record"

    @property
    def replaying(self) -> bool:
        """Whether calls are served from the folder (``mode="replay"``)."""
        return self.mode == "replay"

    @property
    def stats(self) -> RecordingStats:
        """What this recording did so far in this process (a copy)."""
        with self._lock:
            return RecordingStats(**self._stats)

    def summary(self) -> str:
        """Say in one line what this recording did (the ``planexec run`` command prints it)."""
        done = self.stats
        if self.recording:
            return (
                f"recorded into {self.folder}: {_n(done['tool_calls_recorded'], 'tool call')}, "
                f"{_n(done['model_replies_recorded'], 'model reply', 'model replies')}"
            )
        live = f"{_n(done['model_calls_live'], 'model call')} made live" if self.models else ""
        return (
            f"replayed from {self.folder}: {_n(done['tool_calls_replayed'], 'tool call')} "
            f"({done['tool_calls_missing']} not recorded), "
            f"{_n(done['model_replies_replayed'], 'model reply', 'model replies')}"
            + (f"; {live}" if live else "")
        )

    def count(self, what: str) -> None:
        """Count one event of ``what`` (a key of :class:`RecordingStats`)."""
        with self._lock:
            self._stats[what] += 1  # type: ignore[literal-required]
        if self._parent is not None:
            self._parent.count(what)

    def part(self, name: str) -> Recording:
        """Return the recording of one part of the work (an evaluation's example): a subfolder.

        It is ``folder/<name>`` (:func:`part_name`; never a link), in the same mode
        and with the same ``models``; what it does also counts in this recording's
        :attr:`stats`. Replaying, the subfolder must exist (ConfigurationError naming it).
        """
        folder = self.folder / part_name(name)
        if folder.is_symlink() or (
            folder.exists() and not folder.resolve().is_relative_to(self.folder)
        ):
            raise ConfigurationError(f"recording folder {folder} is a link: refused")
        child = Recording(folder, self.mode, models=self.models)
        child._parent = self
        return child

    # --- tools ---------------------------------------------------------------------------

    def _tool_call(self, tool: str, args: dict[str, Any], secrets: list[str]) -> ToolCall:
        """Return a call as recorded: its tool and arguments scrubbed, what changed, its file."""
        return tool_call(self.folder, tool, args, _secrets(secrets))

    def keep_tool(
        self, tool: str, args: dict[str, Any], output: Any, *, secrets: list[str]
    ) -> None:
        """Record a tool call's output (as the step returned it), replacing any earlier one."""
        call = self._tool_call(tool, args, secrets)
        record = _tool_doc(call, output=to_storable(output))
        with self._lock:  # not between a failure's check and its write
            files.write_file(self.folder, call.path, _scrubbed(record, secrets))
        self.count("tool_calls_recorded")

    def keep_tool_failure(
        self, tool: str, args: dict[str, Any], message: str, *, transient: bool, secrets: list[str]
    ) -> None:
        """Record a tool call's failure, unless the same call has a recorded output."""
        call = self._tool_call(tool, args, secrets)
        record = _tool_doc(call, error=FailureDoc(message=str(message), transient=transient))
        with self._lock:
            if call.path.is_file():
                try:
                    if "output" in tool_record(files.read_file(self.folder, call.path), call.path):
                        return  # a success is never replaced by a failure
                except RecordingError:
                    pass  # a broken file is replaced
            files.write_file(self.folder, call.path, _scrubbed(record, secrets))
        self.count("tool_calls_recorded")

    def replay_tool(self, tool: str, args: dict[str, Any], *, secrets: list[str]) -> Any:
        """Return a call's recorded output, or raise its recorded failure.

        Only where the value comes from: the caller checks and scrubs it as it would a live
        output (:func:`planexec.execution.calls.call_tool`). Raises :class:`NoRecordingError`
        when the call was not recorded, and :class:`RecordingError` for a recording that
        cannot be used (naming its file): the call's own file broken, two files of the same
        call, an output that cannot be stored.
        """
        call = self._tool_call(tool, args, secrets)
        if call.path.exists() or call.path.is_symlink():
            self._tool_file(call.path)  # the call's own file, broken: said, not skipped
        record, path = self._find(call)
        if "error" in record:
            failure = record["error"]
            kind = RecordedTransientFailure if failure["transient"] else RecordedToolFailure
            self.count("tool_calls_replayed")
            raise kind(failure["message"])
        try:
            output = to_storable(record["output"])  # a file edited by hand: NaN, a NUL...
        except UnstorableValueError as exc:
            raise RecordingError(f"recording {path}: the output cannot be stored: {exc}") from None
        self.count("tool_calls_replayed")
        return output

    def _tool_file(self, path: Path) -> ToolRecord:
        return tool_record(files.read_file(self.folder, path), path)

    def _index(self, folder: Path) -> _Index:
        """Return the recorded calls of one tool's folder, read once (the files a replay uses)."""
        with self._lock:
            known = self._indexes.get(folder)
            if known is not None:
                return known
            index = _Index()
            for path in files.json_files(self.folder, folder):
                try:
                    record = self._tool_file(path)
                except RecordingError as exc:
                    index.skipped.append(
                        f"{path.name} ({str(exc).removeprefix(f'recording {path} ')})"
                    )
                    continue
                index.calls.append(
                    (path, record["tool"], record["args"], record.get("changed", []))
                )
            self._indexes[folder] = index
            return index

    def _find(self, call: ToolCall) -> tuple[ToolRecord, Path]:
        """Return the recording of this call (whatever its file's name) and its file.

        A file edited by hand keeps its old name. Raises naming the nearest recording's
        differences (and any file skipped) when there is none, and naming both files when two
        hold the same call.
        """
        index = self._index(call.path.parent)
        same_tool = [(p, a, c) for p, name, a, c in index.calls if name == call.tool]
        found = [p for p, a, c in same_tool if call.same(a, c)]
        if len(found) > 1:
            raise RecordingError(
                f"recordings {' and '.join(map(str, found[:2]))} hold the same call of "
                f"{call.tool}: keep one"
            )
        if found:
            return self._tool_file(found[0]), found[0]
        self.count("tool_calls_missing")
        skipped = (
            f" (skipped {_n(len(index.skipped), 'unreadable file')}: "
            f"{'; '.join(index.skipped[:3])})"
            if index.skipped
            else ""
        )
        if not same_tool:
            raise NoRecordingError(f"no recording of tool {call.tool}{skipped}")
        diffs = nearest([(a, c) for _, a, c in same_tool], call.args, call.changed)
        raise NoRecordingError(said(call.tool, diffs) + skipped)

    # --- models --------------------------------------------------------------------------

    def _model_file(self, role: str, key: str) -> Path:
        return self.folder / "models" / safe_name(role) / f"{key}.json"

    def model_reply(self, role: str, key: str) -> BaseMessage | None:
        """Return the reply recorded for the model call ``key`` of ``role``, if there is one."""
        path = self._model_file(role, key)
        if not (path.exists() or path.is_symlink()):
            self.count("model_calls_live")
            return None
        record = model_record(files.read_file(self.folder, path), path)
        try:
            reply = reply_of(record["reply"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordingError(
                f"recording {path} does not hold a model's reply: {type(exc).__name__}: "
                f"{str(exc)[:200]}"
            ) from None
        self.count("model_replies_replayed")
        return reply

    def keep_model_reply(
        self,
        role: str,
        key: str,
        reply: BaseMessage,
        *,
        model: dict[str, Any],
        messages: list[BaseMessage],
        secrets: list[str],
    ) -> None:
        """Record a model call's reply under its key (see :mod:`planexec.recording.models`)."""
        record = ModelRecord(  # sorted keys; the reply as LangChain orders it
            asked=asked(messages),
            model=sorted_json(to_storable(model)),
            reply=to_storable(reply_data(reply)),
            role=role,
        )
        files.write_file(self.folder, self._model_file(role, key), _scrubbed(record, secrets))
        self.count("model_replies_recorded")


@dataclass
class _Index:
    """A tool folder's recorded calls (file, tool, arguments, changed paths) and skipped files."""

    calls: list[tuple[Path, str, dict[str, Any], list[str]]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _tool_doc(call: ToolCall, **outcome: Any) -> ToolRecord:
    """Return a call's record: its keys sorted, ``changed`` only when an argument was."""
    record: dict[str, Any] = {"args": call.args, **outcome, "tool": call.tool}
    if call.changed:
        record["changed"] = call.changed
    return cast(ToolRecord, dict(sorted(record.items())))


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _secrets(given: list[str]) -> list[str]:
    """Return the secrets given and the process's own, longest first."""
    return sorted(set(given) | set(secret_values()), key=len, reverse=True)


def _scrubbed(record: Any, secrets: list[str]) -> Any:
    """Return ``record`` with every secret replaced: the one check before anything is written."""
    return redact(record, _secrets(secrets))


_PLAIN_PART = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")


def part_name(name: str) -> str:
    """Return the folder name of a part: ``name`` if lower-case letters, digits and ``_.-``.

    Any other name (capitals, spaces, dots alone, too long) gets its safe characters, in lower
    case, and ``+`` and a hash of the name: two names never share a folder, on a file system that
    ignores case too, and no plain name can be written as another's hashed one (``+`` is never
    in a plain name).
    """
    if _PLAIN_PART.fullmatch(name) and name not in {".", ".."}:
        return name
    slug = re.sub(r"[^a-z0-9_.-]+", "_", name.lower()).strip("._")[:60] or "_"
    return f"{slug}+{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"
