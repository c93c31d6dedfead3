"""A recording's files on disk: safe names, canonical JSON, atomic writes, hardened reads.

Every file is plain JSON with one-space indents and a final newline, its own keys and the
call's arguments sorted, so the same calls give the same bytes and a change reads well in a
diff. A name from a call (a tool's or a
role's) becomes a folder name that stays inside the recording's folder. A file is written to a
temporary file beside it and renamed into place, so readers and concurrent writers only ever
see whole files. Reading refuses, with an error naming the file, a file that is not valid JSON
(or gives a key twice: a reviewer would read one value, a replay serve another), is larger
than :data:`MAX_FILE_BYTES`, is not a regular file, or lies (through a link) outside the
recording's folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from planexec.errors import ConfigurationError

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest recording file read (64 MiB): a larger one is refused, not loaded."""

MAX_NAME_CHARS = 80
"""Longest folder name made from a tool's or role's name (a hash keeps long ones apart)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class RecordingError(ConfigurationError):
    """A recording's file cannot be used (invalid, too large, outside its folder) or written."""


def canonical(value: Any) -> str:
    """Return ``value`` as compact JSON with sorted keys: what a key's hash is taken of."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def digest(value: Any) -> str:
    """Return the SHA-256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def safe_name(name: str) -> str:
    """Return a folder name for ``name`` that stays where it is put (no ``/``, no ``..``).

    A name made only of letters, digits and ``_.-`` (not starting with a dot) is kept as it
    is; any other gets its unsafe characters replaced and a short hash of the name added, so
    two names never share a folder by accident.
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")[:MAX_NAME_CHARS]
    if cleaned == name and name:
        return name
    short = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned or '_'}-{short}"


def sorted_json(value: Any) -> Any:
    """Return JSON data with every object's keys sorted (what a key is made of)."""
    return json.loads(canonical(value))


def file_text(value: Any) -> str:
    """Return a record as its file's text: one-space indents, a final newline.

    Keys stay in the order the record has them: a record's own keys and a call's arguments
    are sorted when it is made; an output keeps the order its tool gave it (a later step's
    prompt shows it in that order, so a replay must too).
    """
    return json.dumps(value, ensure_ascii=False, indent=1) + "\n"


def inside(root: Path, path: Path) -> Path:
    """Return ``path`` resolved, if it lies inside ``root`` (resolved); raise if it does not."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise RecordingError(f"recording {path} lies outside {root} (through a link): refused")
    return resolved


def write_file(root: Path, path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` (below ``root``) whole: a temporary file renamed into place."""
    try:
        inside(root, _nearest_existing(path.parent))  # no folder made outside root, ever
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = inside(root, path.parent)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    except OSError as exc:
        raise RecordingError(f"cannot write recording {path}: {exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            os.fchmod(out.fileno(), 0o644)  # a file to commit, not a private temporary
            out.write(file_text(value))
        os.replace(temporary, folder / path.name)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise RecordingError(f"cannot write recording {path}: {exc}") from None


def _nearest_existing(path: Path) -> Path:
    """Return ``path`` or its nearest ancestor that exists (a link counts, even a broken one)."""
    while not (path.exists() or path.is_symlink()) and path.parent != path:
        path = path.parent
    return path


class _DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Return an object's pairs as a dict; raise for a key given twice (which one counts?)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKeyError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def read_file(root: Path, path: Path) -> Any:
    """Return the JSON data of the recording file ``path`` (below ``root``), read with care."""
    resolved = inside(root, path)
    try:
        if not resolved.is_file():
            raise RecordingError(f"recording {path} is not a regular file")
        size = resolved.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RecordingError(
                f"recording {path} holds {size} bytes, more than the {MAX_FILE_BYTES} bytes "
                "a recording file may hold: refused"
            )
        with resolved.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RecordingError(f"cannot read recording {path}: {exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise RecordingError(f"recording {path} grew past {MAX_FILE_BYTES} bytes: refused")
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        said = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise RecordingError(f"recording {path} is not valid JSON: {said}") from None


def json_files(root: Path, folder: Path) -> list[Path]:
    """Return the ``*.json`` files of ``folder`` (below ``root``), sorted; none if it is absent."""
    if not folder.is_dir():
        return []
    inside(root, folder)
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
