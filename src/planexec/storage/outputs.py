"""Step outputs: kept in state when small, spilled to files planexec owns when large, previewed.

A step record keeps a small output in ``output`` (:func:`keep_output`); a large one is written to
``OUTPUTS/<uuid>.json`` and the record keeps an :class:`~planexec.state.OutputFile` (id, size,
sha256, preview) in its own field, ``output_file``, which only the executor writes: no value a
tool returns can be taken for a reference. Each spill gets a fresh uuid, so a fork or a retry
never overwrites another branch's file, and :func:`output_of`, the one way outputs are read
back, checks size and sha256 before trusting a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planexec.concurrency.offloop import run_in_thread
from planexec.errors import PlanexecError, ToolError
from planexec.state import OutputFile

MAX_OUTPUT_BYTES = 64 * 1024 * 1024
"""Largest output a step may return (as JSON text); a larger one fails the step."""
PREVIEW_CHARS = 200
"""Length of a spilled output's preview."""

_ID = re.compile(r"[0-9a-f]{32}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class OutputFileError(PlanexecError, ValueError):
    """A spilled output cannot be read back as it was written (missing, changed, malformed)."""


class OutputStore:
    """The folder of spilled outputs, one file per spill, named by a fresh uuid."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Remember the folder (created when the first output is spilled)."""
        self.folder = Path(folder)

    def __repr__(self) -> str:
        """Show the folder."""
        return f"OutputStore({str(self.folder)!r})"

    def save(self, text: str, preview: str) -> OutputFile:
        """Write an output's JSON text to a new file; return the record that finds and checks it."""
        data = text.encode("utf-8")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        file_id = uuid.uuid4().hex
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, self.folder / f"{file_id}.json")  # readers never see half a file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return OutputFile(
            id=file_id, bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), preview=preview
        )

    def has(self, ref: Mapping[str, Any]) -> bool:
        """Say whether a spilled output's file is still there (not whether it is unchanged)."""
        file_id = ref.get("id")
        return (
            isinstance(file_id, str)
            and bool(_ID.fullmatch(file_id))
            and (self.folder / f"{file_id}.json").is_file()
        )

    def discard(self, ref: Mapping[str, Any]) -> None:
        """Remove a spilled output's file (a result that will never be read); gone already: fine."""
        file_id = ref.get("id")
        if isinstance(file_id, str) and _ID.fullmatch(file_id):
            (self.folder / f"{file_id}.json").unlink(missing_ok=True)

    def load(self, ref: Mapping[str, Any]) -> Any:
        """Read a spilled output back, or raise OutputFileError if it is not what was written."""
        file_id, size, digest = ref.get("id"), ref.get("bytes"), ref.get("sha256")
        if not (
            isinstance(file_id, str)
            and _ID.fullmatch(file_id)
            and isinstance(size, int)
            and size >= 0
            and isinstance(digest, str)
            and _SHA256.fullmatch(digest)
        ):
            raise OutputFileError("the step's output file record is malformed")
        try:
            fd = os.open(self.folder / f"{file_id}.json", os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(size + 1)
        except OSError as exc:
            raise OutputFileError(
                f"the step's output file {file_id} cannot be read: {exc.strerror or exc}"
            ) from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise OutputFileError(
                f"the step's output file {file_id} was changed after it was written"
            )
        return json.loads(data)


def output_of(record: Mapping[str, Any], store: OutputStore) -> Any:
    """Return a step's full output: inline in its record, or read back and checked from its file."""
    ref = record.get("output_file")
    if ref is None:
        return record.get("output")
    if not isinstance(ref, Mapping):
        raise OutputFileError("the step's output file record is malformed")
    return store.load(ref)


async def keep_output(
    value: Any, store: OutputStore, inline_limit: int
) -> tuple[Any, OutputFile | None]:
    """Keep a small (storable) output as is; spill a large one to ``store``.

    Returns ``(output, None)`` for an output kept in state, ``(None, output_file)`` for a
    spilled one. Raises :class:`~planexec.errors.ToolError` past :data:`MAX_OUTPUT_BYTES`.
    """
    text = json.dumps(value, ensure_ascii=False)
    size = len(text.encode("utf-8"))
    if size > MAX_OUTPUT_BYTES:
        raise ToolError(f"the output is {size} bytes; at most {MAX_OUTPUT_BYTES} are kept")
    if size <= inline_limit:
        return value, None
    preview = summarize(value, PREVIEW_CHARS)
    saved: OutputFile = await run_in_thread(lambda: store.save(text, preview))  # file I/O
    return None, saved


def summarize(output: Any, limit: int = 240) -> str:
    """Return a one-line preview of an output."""
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_of(output: Any, output_file: OutputFile | None) -> str:
    """Return a step's one-line summary, from its output or its spilled output's preview."""
    if output_file is None:
        return summarize(output)
    return f"{output_file['preview']} ({output_file['bytes']:,} bytes, kept in a file)"
