"""The run's workspace: the one folder tools may read and write.

The executor sets the workspace for the duration of each step (``use_workspace``);
tools resolve every path through ``current_workspace().resolve(...)``, which refuses
absolute paths, ``..`` escapes, symlinks and hard links leading out, and special files.
"""

from __future__ import annotations

import contextvars
import fnmatch
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from planexec.errors import WorkspaceError

_current: contextvars.ContextVar[Workspace | None] = contextvars.ContextVar(
    "planexec_workspace", default=None
)


class Workspace:
    """A folder on disk that confines every file a tool touches."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Create the folder if needed and remember its real path."""
        path = Path(root).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.root = path.resolve()

    def __repr__(self) -> str:
        """Show the folder."""
        return f"Workspace({str(self.root)!r})"

    def resolve(self, relative: str, *, must_exist: bool = False) -> Path:
        """Return the real path of ``relative`` inside the workspace, or raise WorkspaceError."""
        if not isinstance(relative, str) or not relative.strip():
            raise WorkspaceError("a path must be a non-empty string")
        if "\x00" in relative:
            raise WorkspaceError("a path must not contain NUL characters")
        candidate = Path(relative)
        if candidate.is_absolute():
            raise WorkspaceError(
                f"{relative!r}: absolute paths are not allowed; use a path "
                "relative to the workspace"
            )
        if ".." in candidate.parts:
            raise WorkspaceError(f"{relative!r}: '..' is not allowed in workspace paths")
        full = (self.root / candidate).resolve()
        if full != self.root and not full.is_relative_to(self.root):
            raise WorkspaceError(f"{relative!r} leads outside the workspace (through a link)")
        if full.exists():
            info = full.stat()
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise WorkspaceError(f"{relative!r} is not a regular file or folder")
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                raise WorkspaceError(
                    f"{relative!r} is a hard link; it may lead outside the workspace"
                )
        elif must_exist:
            raise WorkspaceError(f"{relative!r} does not exist in the workspace")
        return full

    def relative(self, path: Path) -> str:
        """Return ``path`` relative to the workspace root, as tools report it."""
        return path.resolve().relative_to(self.root).as_posix()

    def iter_files(self, folder: Path | None = None, pattern: str = "*") -> Iterator[Path]:
        """Yield the regular files under ``folder`` whose names match ``pattern``, lazily.

        Folders are visited in name order, each folder's files before its subfolders; links
        and planexec's own ``.planexec`` folder are skipped. Callers stop when they have enough,
        so a huge workspace costs only what is listed.
        """
        for current, dirs, names in os.walk(folder or self.root):
            dirs[:] = sorted(d for d in dirs if d != ".planexec")
            for name in sorted(fnmatch.filter(names, pattern)):
                path = Path(current, name)
                if not path.is_symlink() and path.is_file():
                    yield path

    def prepare_output(self, relative: str) -> Path:
        """Resolve a path a tool will write, creating its parent folders inside the workspace."""
        target = self.resolve(relative)
        if target.is_dir():
            raise WorkspaceError(f"{relative!r} is a folder, not a file")
        parent = target.parent
        parent.mkdir(parents=True, exist_ok=True)
        self.resolve(self.relative(parent))
        return target


@contextmanager
def use_workspace(root: str | os.PathLike[str] | Workspace) -> Iterator[Workspace]:
    """Make ``root`` the workspace of the tools called inside the ``with`` block."""
    workspace = root if isinstance(root, Workspace) else Workspace(root)
    token = _current.set(workspace)
    try:
        yield workspace
    finally:
        _current.reset(token)


def current_workspace() -> Workspace:
    """Return the workspace of the running step (raise WorkspaceError outside of one)."""
    workspace = _current.get()
    if workspace is None:
        raise WorkspaceError("no workspace is set: call tools inside use_workspace(...)")
    return workspace
