"""The run's workspace: the one folder tools may read and write.

The executor sets the workspace for the duration of each step (``use_workspace``). Every file
a tool opens, writes or lists goes through one mechanism, :meth:`Workspace.folder`: the path is
walked from the workspace's own folder one name at a time, each folder opened relative to the
one before it (``openat``) with ``O_NOFOLLOW``, so a link is never followed, whenever it
appears: a folder swapped for a link while a tool runs fails the tool, it cannot redirect it.
Files are read through a handle opened the same way and checked after opening
(:meth:`Workspace.open_read`: a regular file with one link), and written to a new file in
their folder that is then renamed over the name (:meth:`Workspace.open_write`). Absolute
paths, ``..``, links, hard links and special files are refused with :class:`WorkspaceError`,
as is every failure of the system to take a path.
"""

from __future__ import annotations

import contextvars
import errno
import fnmatch
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, NoReturn, cast

from planexec.errors import WorkspaceError

_current: contextvars.ContextVar[Workspace | None] = contextvars.ContextVar(
    "planexec_workspace", default=None
)

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO never blocks an open
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
MAX_PATH_BYTES = 4096
"""Longest full path (workspace folder included) a tool may name: the system's PATH_MAX."""
TEMP_PREFIX = ".planexec-"
TEMP_SUFFIX = ".tmp"
"""A file being written is ``.planexec-<uuid>.tmp`` in its folder until it is complete."""
LINK_ERRORS = {errno.ELOOP, errno.EMLINK}  # O_NOFOLLOW on a link (EMLINK: FreeBSD)


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

    # -- the one mechanism: names checked, then walked without following links -----------

    def parts(self, relative: str) -> tuple[str, ...]:
        """Return the names of a workspace path, or raise WorkspaceError (no I/O).

        ``.`` and empty names are dropped (``./a//b`` is ``a/b``); the workspace itself has
        no names.
        """
        if not isinstance(relative, str) or not relative.strip():
            raise WorkspaceError("a path must be a non-empty string")
        if "\x00" in relative:
            raise WorkspaceError("a path must not contain NUL characters")
        if relative.startswith("/"):
            raise WorkspaceError(
                f"{relative!r}: absolute paths are not allowed; use a path "
                "relative to the workspace"
            )
        names = tuple(p for p in relative.split("/") if p not in {"", "."})
        if ".." in names:
            raise WorkspaceError(f"{relative!r}: '..' is not allowed in workspace paths")
        try:
            size = len(os.fsencode(str(self.root.joinpath(*names))))
        except UnicodeEncodeError:
            raise WorkspaceError(f"{relative!r} cannot be a file name on this system") from None
        if size >= MAX_PATH_BYTES:
            raise WorkspaceError(f"{relative!r} is too long a path ({size:,} bytes)")
        return names

    def _file_parts(self, relative: str) -> tuple[str, ...]:
        """Return the names of a path that must name a file (not the workspace, no final /)."""
        names = self.parts(relative)
        if not names or relative.rstrip().endswith("/"):
            raise WorkspaceError(f"{relative!r} names a folder, not a file")
        return names

    def name(self, relative: str) -> str:
        """Return ``relative`` as tools report it (``./a//b`` is ``a/b``; the root is ``.``)."""
        return "/".join(self.parts(relative)) or "."

    @contextmanager
    def folder(self, relative: str, *, create: bool = False) -> Iterator[int]:
        """Yield an open descriptor of a workspace folder, walked without following links.

        Each name is opened relative to the folder before it with ``O_DIRECTORY|O_NOFOLLOW``;
        ``create`` makes missing folders (inside the folder just opened). Whatever the tree
        becomes meanwhile, the descriptor is a folder inside the workspace, or this raises
        WorkspaceError.
        """
        with self._folder(self.parts(relative), relative, create) as fd:
            yield fd

    @contextmanager
    def _folder(self, names: tuple[str, ...], relative: str, create: bool) -> Iterator[int]:
        with self._refused(relative, "."):
            fd = self._open_root()
        try:
            for i, name in enumerate(names):
                with self._refused(relative, "/".join(names[: i + 1]), folder=True):
                    fd = _swap(fd, _open_folder(name, fd, create))
            yield fd
        finally:
            os.close(fd)

    def _refused(
        self, relative: str, where: str, *, folder: bool = False
    ) -> AbstractContextManager[None]:
        """:func:`_refused` for a path of this workspace (a missing one names its folder)."""
        return _refused(relative, where, self.root, folder=folder)

    def _open_root(self) -> int:
        """Open the workspace folder itself, walking its real path from ``/`` without links.

        The path was resolved when the workspace was made: a folder on it swapped for a link
        since (a shared workspace ``team/sales`` inside the workspace ``team``) is refused.
        """
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in self.root.parts[1:]:
                fd = _swap(fd, _opened_folder(name, fd))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def info(self, relative: str) -> os.stat_result | None:
        """Return what ``relative`` is (``lstat``, its folders walked as above), None if absent.

        Raises WorkspaceError for a link (anywhere in the path), a hard link or a special file.
        """
        names = self.parts(relative)
        if not names:
            with self._folder(names, relative, False) as fd:
                return os.fstat(fd)
        try:
            with self._folder(names[:-1], relative, False) as fd, self._refused(relative, relative):
                found = os.stat(names[-1], dir_fd=fd, follow_symlinks=False)
        except _Missing:
            return None
        _check_kind(found, relative)
        return found

    # -- what tools use -----------------------------------------------------------------

    @contextmanager
    def open_read(self, relative: str) -> Iterator[BinaryIO]:
        """Yield a regular file of the workspace opened for reading (binary).

        The file is checked after it is opened (its descriptor), so what is read is what was
        checked: a regular file with one link, inside the workspace.
        """
        names = self._file_parts(relative)
        with self._folder(names[:-1], relative, False) as dfd:
            with self._refused(relative, relative):
                seen = os.stat(names[-1], dir_fd=dfd, follow_symlinks=False)
            _check_kind(seen, relative)  # a special file is never opened (a device may act)
            if stat.S_ISDIR(seen.st_mode):
                raise WorkspaceError(f"{relative!r} is a folder, not a file")
            with self._refused(relative, relative):
                fd = os.open(names[-1], os.O_RDONLY | NOFOLLOW, dir_fd=dfd)
        try:
            opened = os.fstat(fd)
            _check_kind(opened, relative)
            if stat.S_ISDIR(opened.st_mode):
                raise WorkspaceError(f"{relative!r} is a folder, not a file")
            os.set_blocking(fd, True)
            handle = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        with handle:
            yield cast(BinaryIO, handle)

    def read_bytes(self, relative: str, limit: int | None = None) -> bytes:
        """Return a file's bytes (at most ``limit``), opened as :meth:`open_read` does."""
        with self.open_read(relative) as handle:
            return handle.read() if limit is None else handle.read(limit)

    @contextmanager
    def open_write(self, relative: str) -> Iterator[BinaryIO]:
        """Yield a new file that replaces ``relative`` when the block ends without an error.

        Missing folders are made (inside the workspace, as :meth:`folder`); the data goes to
        a new file in the target's folder, created through that folder's descriptor, and is
        renamed over the name at the end, so no link, however it got there, is written
        through. A failed block leaves the name as it was.
        """
        names = self._file_parts(relative)
        if names[0] == ".planexec" or _being_written(names[-1]):
            raise WorkspaceError(f"{relative!r} is a name planexec keeps for itself")
        with self._folder(names[:-1], relative, True) as dfd:
            with self._refused(relative, relative):
                try:
                    there: os.stat_result | None = os.stat(
                        names[-1], dir_fd=dfd, follow_symlinks=False
                    )
                except FileNotFoundError:
                    there = None
            if there is not None:
                _check_kind(there, relative)
                if stat.S_ISDIR(there.st_mode):
                    raise WorkspaceError(f"{relative!r} is a folder, not a file")
            temp = f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
            with self._refused(relative, relative):
                fd = os.open(temp, flags, 0o666, dir_fd=dfd)
            try:
                if there is not None:  # its permissions, never setuid/setgid/sticky bits
                    os.fchmod(fd, stat.S_IMODE(there.st_mode) & 0o777)
                os.set_blocking(fd, True)
                with _full(relative), os.fdopen(fd, "wb") as handle:
                    yield cast(BinaryIO, handle)
                with self._refused(relative, relative):
                    os.rename(temp, names[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temp, dir_fd=dfd)
                raise

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Replace ``relative`` with ``data``, as :meth:`open_write` does."""
        with self.open_write(relative) as handle:
            handle.write(data)

    def files(self, folder: str = ".", pattern: str = "*") -> Iterator[str]:
        """Yield the regular files under ``folder`` whose names match ``pattern``, lazily.

        Folders are visited in name order, each folder's files before its subfolders; links,
        special files, files being written and planexec's own ``.planexec`` folder are
        skipped. Every folder is opened as :meth:`folder` opens one, so a folder swapped for a
        link meanwhile is not entered. Callers stop when they have enough, so a huge
        workspace costs only what is listed.
        """
        base = self.name(folder)
        pending = ["" if base == "." else base + "/"]  # folders still to list, deepest last
        first = True
        while pending:
            prefix = pending.pop()
            names = tuple(prefix.split("/")[:-1])
            try:
                with self._folder(names, folder, False) as fd:
                    found, subfolders = _listed(fd, pattern, folder, prefix, self.root)
            except WorkspaceError:
                if first:
                    raise  # the folder asked for: its error is the caller's
                continue  # swapped for a link or a file, or gone, since it was listed
            first = False
            yield from (prefix + name for name in found)
            pending.extend(f"{prefix}{name}/" for name in reversed(subfolders))

    # -- paths, for callers that need one (checks only: open files with the methods above) --

    def resolve(self, relative: str, *, must_exist: bool = False) -> Path:
        """Return the path of ``relative`` inside the workspace, or raise WorkspaceError.

        The path is checked as :meth:`info` checks it (no links anywhere in it), but it is
        only a name: between this check and an open by name the tree may change, so read and
        write files with :meth:`open_read` and :meth:`open_write`.
        """
        names = self.parts(relative)
        if self.info(relative) is None and must_exist:
            raise WorkspaceError(missing_message(relative, self.root))
        return self.root.joinpath(*names)

    def relative(self, path: str | os.PathLike[str]) -> str:
        """Return a path below the workspace folder relative to it, as tools report it."""
        full = Path(os.path.normpath(path))
        if not full.is_relative_to(self.root):
            raise WorkspaceError(f"{str(path)!r} is not inside the workspace")
        return full.relative_to(self.root).as_posix()

    def iter_files(self, folder: Path | None = None, pattern: str = "*") -> Iterator[Path]:
        """Yield the paths of :meth:`files` (``folder`` a path below the workspace)."""
        base = "." if folder is None else self.relative(folder)
        for found in self.files(base, pattern):
            yield self.root / found


class _Missing(WorkspaceError):
    """A name of the path does not exist."""


def _open_folder(name: str, at: int, create: bool) -> int:
    try:
        return _opened_folder(name, at)
    except FileNotFoundError:
        if not create:
            raise
    with suppress(FileExistsError):  # made meanwhile: opened (and checked) below
        os.mkdir(name, 0o777, dir_fd=at)
    return _opened_folder(name, at)


def _opened_folder(name: str, at: int) -> int:
    try:
        return os.open(name, FOLDER_FLAGS, dir_fd=at)
    except NotADirectoryError:  # Linux says so of a link, with O_DIRECTORY: which is it?
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=at, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if link:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def _swap(old: int, new: int) -> int:
    os.close(old)
    return new


def _check_kind(info: os.stat_result, relative: str) -> None:
    if stat.S_ISLNK(info.st_mode):
        _link(relative)
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise WorkspaceError(f"{relative!r} is not a regular file or folder")
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise WorkspaceError(f"{relative!r} is a hard link; it may lead outside the workspace")


def _link(relative: str, where: str | None = None) -> NoReturn:
    at = f" ({where!r})" if where and where != relative else ""
    raise WorkspaceError(
        f"{relative!r} goes through a link{at}; file tools do not follow links, which may "
        "lead outside the workspace"
    )


def missing_message(relative: str, root: Path) -> str:
    """Say that ``relative`` does not exist, naming the workspace folder it was looked for in."""
    return f"{relative!r} does not exist in the workspace {root}"


@contextmanager
def _refused(relative: str, where: str, root: Path, *, folder: bool = False) -> Iterator[None]:
    """Turn the system's refusal of a path into the workspace's own error, in one line."""
    try:
        yield
    except OSError as exc:
        code = exc.errno
        if code in LINK_ERRORS:
            _link(relative, where)
        if code == errno.ENOENT:
            raise _Missing(missing_message(relative, root)) from None
        if code == errno.ENOTDIR and folder:
            part = "" if where == relative else f": {where!r}"
            raise WorkspaceError(f"{relative!r}{part} is not a folder") from None
        if code in {errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST}:
            raise WorkspaceError(f"{relative!r} is a folder, not a file") from None
        reason = exc.strerror or type(exc).__name__  # e.g. "File name too long"
        raise WorkspaceError(f"{relative!r}: {reason}") from None


def _being_written(name: str) -> bool:
    """Say whether a name is one of planexec's files being written (``.planexec-*.tmp``)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


@contextmanager
def _full(relative: str) -> Iterator[None]:
    """Turn a write the disk refuses (full, a file too large, a quota) into a WorkspaceError."""
    try:
        yield
    except OSError as exc:
        if exc.errno in {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}:
            raise WorkspaceError(f"{relative!r}: {exc.strerror}") from None
        raise


def _listed(
    fd: int, pattern: str, folder: str, prefix: str, root: Path
) -> tuple[list[str], list[str]]:
    """Return a folder's matching regular files and its subfolders, each in name order.

    Links, special files, files being written and planexec's own ``.planexec`` are left out.
    Folders are listed one at a time, each opened from the workspace (not kept open while
    its subfolders are): a tree of any depth costs no more handles, and no recursion.
    """
    with _refused(folder, prefix or ".", root), os.scandir(fd) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    files, subfolders = [], []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name != ".planexec":
                subfolders.append(entry.name)
        elif (
            entry.is_file(follow_symlinks=False)
            and fnmatch.fnmatchcase(entry.name, pattern)
            and not _being_written(entry.name)
        ):
            files.append(entry.name)
    return files, subfolders


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
