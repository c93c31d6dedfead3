"""File tools confined to the run's workspace: read_file, write_file, list_files."""

from __future__ import annotations

from io import TextIOWrapper
from itertools import islice

from langchain_core.tools import tool
from typing_extensions import TypedDict

from planexec.tools.workspace import current_workspace

MAX_LISTED = 500


class FileText(TypedDict):
    """What ``read_file`` returns."""

    path: str
    content: str
    truncated: bool


class FileWritten(TypedDict):
    """What ``write_file`` returns."""

    path: str
    bytes: int


class FilesListed(TypedDict):
    """What ``list_files`` returns."""

    folder: str
    files: list[str]
    truncated: bool


@tool
def read_file(path: str, max_chars: int = 100_000) -> FileText:
    """Read a text file of the workspace; return its content (cut at max_chars)."""
    workspace = current_workspace()
    with workspace.open_read(path) as raw, TextIOWrapper(raw, "utf-8", "replace") as handle:
        content = handle.read(max_chars + 1)
    return {
        "path": workspace.name(path),
        "content": content[:max_chars],
        "truncated": len(content) > max_chars,
    }


@tool
def write_file(path: str, content: str) -> FileWritten:
    """Write text to a file of the workspace (replacing it); return its path and size."""
    workspace = current_workspace()
    data = content.encode("utf-8")
    workspace.write_bytes(path, data)
    return {"path": workspace.name(path), "bytes": len(data)}


@tool
def list_files(folder: str = ".", pattern: str = "*") -> FilesListed:
    """List the files of a workspace folder (recursively) whose names match a glob pattern.

    The pattern matches file names (``*.csv``), not paths.
    """
    workspace = current_workspace()
    found = list(islice(workspace.files(folder, pattern), MAX_LISTED + 1))
    files = found[:MAX_LISTED]
    return {"folder": folder, "files": files, "truncated": len(found) > MAX_LISTED}


FILE_TOOLS = [read_file, list_files]
SIDE_EFFECT_FILE_TOOLS = [write_file]
FILE_FIELDS: dict[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "write_file": ("path",),
    "list_files": ("files",),
}
"""Output fields of these tools that name workspace files."""
