"""File tools confined to the run's workspace: read_file, write_file, list_files."""

from __future__ import annotations

from itertools import islice
from typing import Any

from langchain_core.tools import tool

from planexec.errors import ToolError
from planexec.tools.workspace import current_workspace

MAX_LISTED = 500


@tool
def read_file(path: str, max_chars: int = 100_000) -> dict[str, Any]:
    """Read a text file of the workspace; return its content (cut at max_chars)."""
    target = current_workspace().resolve(path, must_exist=True)
    if not target.is_file():
        raise ToolError(f"{path!r} is a folder, not a file")
    with target.open(encoding="utf-8", errors="replace") as handle:
        content = handle.read(max_chars + 1)
    return {
        "path": current_workspace().relative(target),
        "content": content[:max_chars],
        "truncated": len(content) > max_chars,
    }


@tool
def write_file(path: str, content: str) -> dict[str, Any]:
    """Write text to a file of the workspace (replacing it); return its path and size."""
    workspace = current_workspace()
    target = workspace.prepare_output(path)
    data = content.encode("utf-8")
    target.write_bytes(data)
    return {"path": workspace.relative(target), "bytes": len(data)}


@tool
def list_files(folder: str = ".", pattern: str = "*") -> dict[str, Any]:
    """List the files of a workspace folder (recursively) whose names match a glob pattern.

    The pattern matches file names (``*.csv``), not paths.
    """
    workspace = current_workspace()
    base = workspace.resolve(folder, must_exist=True)
    if not base.is_dir():
        raise ToolError(f"{folder!r} is not a folder")
    found = list(islice(workspace.iter_files(base, pattern), MAX_LISTED + 1))
    files = [workspace.relative(path) for path in found[:MAX_LISTED]]
    return {"folder": folder, "files": files, "truncated": len(found) > MAX_LISTED}


FILE_TOOLS = [read_file, list_files]
SIDE_EFFECT_FILE_TOOLS = [write_file]
FILE_FIELDS: dict[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "write_file": ("path",),
    "list_files": ("files",),
}
"""Output fields of these tools that name workspace files."""
