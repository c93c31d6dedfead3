"""Where a run's files live: the operator chooses the root, a client only names a folder below it.

Layout of a sandbox (``build_graph(workspace_root=...)``, else ``$PLANEXEC_WORKSPACE_ROOT``,
else ``./planexec-workspaces``)::

    ROOT/threads/THREAD_ID/   a thread's own workspace (the default: threads never share files)
    ROOT/shared/NAME/         the workspace of every run whose context names NAME
    ROOT/.planexec/outputs/   spilled step outputs (inside no workspace: tools cannot reach them)

A single-user program (the CLI) may instead give every run one folder of its own choosing
(:meth:`Sandbox.one_folder`); its spilled outputs then live in a folder outside that one.

:meth:`Sandbox.for_run` is the one place a run's workspace is decided; every node asks it.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from planexec.context import Context
from planexec.errors import ConfigurationError
from planexec.storage.outputs import OutputStore
from planexec.tools.workspace import Workspace

ROOT_ENV = "PLANEXEC_WORKSPACE_ROOT"
OUTPUTS_ENV = "PLANEXEC_OUTPUTS_DIR"
DEFAULT_ROOT = "planexec-workspaces"
THREADS, SHARED = "threads", "shared"
INTERNAL = ".planexec"
MAX_SEGMENT_CHARS = 128
MAX_NAME_CHARS = 255
MAX_NAME_PARTS = 8
_SEGMENT = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_SEGMENT_CHARS - 1}}}")
_RULE = (
    "letters, digits, '.', '_' and '-', not starting with '.' or '-', "
    f"at most {MAX_SEGMENT_CHARS} characters"
)


class SandboxError(ConfigurationError, ValueError):
    """A workspace name, thread id or sandbox setting is refused; nothing was read or written."""


def check_name(name: object) -> tuple[str, ...]:
    """Return the parts of a client's workspace name, or raise SandboxError saying why not.

    A name is one or more parts joined by ``/`` (``sales`` or ``team/sales``), each made of
    letters, digits, ``.``, ``_`` and ``-`` and not starting with ``.`` or ``-``: no absolute
    paths, no ``..``, no empty parts, no backslashes, nothing hidden.
    """
    if not isinstance(name, str):
        raise SandboxError(f"the workspace name must be text, not {type(name).__name__}")
    if not name.strip():
        raise SandboxError(
            "the workspace name is empty: give a folder name such as 'sales', or leave it "
            "unset for one workspace per thread"
        )
    if len(name) > MAX_NAME_CHARS:
        raise SandboxError(f"the workspace name is longer than {MAX_NAME_CHARS} characters")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise SandboxError(
            f"workspace {name!r}: absolute paths are not accepted; the workspace is a name "
            "below the operator's workspace root, such as 'sales'"
        )
    parts = tuple(name.split("/"))
    if ".." in parts:
        raise SandboxError(f"workspace {name!r}: '..' is not accepted in a workspace name")
    if len(parts) > MAX_NAME_PARTS:
        raise SandboxError(f"workspace {name!r}: at most {MAX_NAME_PARTS} parts")
    for part in parts:
        if not _SEGMENT.fullmatch(part):
            raise SandboxError(
                f"workspace {name!r}: each part of a workspace name must be {_RULE}"
                + (" (and not empty)" if not part else "")
            )
    return parts


def check_thread_id(thread_id: object) -> str:
    """Return a thread id fit to name a folder, or raise SandboxError (ids that are paths, too)."""
    if isinstance(thread_id, uuid.UUID):
        return str(thread_id)
    if thread_id is None:
        raise SandboxError(
            "this run has no thread id, so it has no workspace of its own: pass "
            "config={'configurable': {'thread_id': ...}} or a workspace name in the context"
        )
    if isinstance(thread_id, int) and not isinstance(thread_id, bool) and thread_id >= 0:
        return str(thread_id)
    if isinstance(thread_id, str) and _SEGMENT.fullmatch(thread_id):
        return thread_id
    raise SandboxError(
        f"thread id {thread_id!r} cannot name a workspace folder: use {_RULE} (a UUID is fine)"
    )


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _absolute(path: str | os.PathLike[str], what: str) -> Path:
    if not str(path).strip():
        raise SandboxError(f"the {what} is empty: give a folder")
    return Path(path).expanduser().resolve()


def default_outputs_dir() -> Path:
    """Where a one-folder sandbox keeps spilled outputs by default.

    ``$PLANEXEC_OUTPUTS_DIR``, else the user's data folder (``~/.local/share/planexec/outputs``
    on Linux).
    """
    if os.environ.get(OUTPUTS_ENV, "").strip():
        return Path(os.environ[OUTPUTS_ENV])
    from platformdirs import user_data_path

    return user_data_path("planexec") / "outputs"


@dataclass(frozen=True)
class Sandbox:
    """The operator's choice of where runs' workspaces and planexec's spilled outputs live."""

    root: Path
    outputs: Path
    one_folder_only: bool = False

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> Sandbox:
        """Return a sandbox with workspaces under ``root``: one per thread, or one a context names.

        ``root`` defaults to ``$PLANEXEC_WORKSPACE_ROOT``, else ``./planexec-workspaces``.
        """
        if root is None:
            root = os.environ.get(ROOT_ENV, "").strip() or DEFAULT_ROOT
        base = _absolute(root, "workspace root")
        return cls(root=base, outputs=base / INTERNAL / "outputs")

    @classmethod
    def one_folder(
        cls, folder: str | os.PathLike[str], *, outputs: str | os.PathLike[str] | None = None
    ) -> Sandbox:
        """Return a sandbox in which every run works in ``folder`` itself.

        For a single user's own choice of folder (the CLI's ``--workspace``). Spilled outputs
        go to ``outputs`` (default: :func:`default_outputs_dir`), which must not overlap it;
        context workspace names are refused.
        """
        base = _absolute(folder, "workspace folder")
        spills = _absolute(outputs if outputs is not None else default_outputs_dir(), "outputs")
        if _is_within(spills, base) or _is_within(base, spills):
            raise SandboxError(
                f"planexec's outputs folder {spills} and the workspace {base} overlap: tools "
                f"could read or change planexec's own files; set {OUTPUTS_ENV} elsewhere or "
                "choose another workspace"
            )
        return cls(root=base, outputs=spills, one_folder_only=True)

    def workspace_path(self, name: str | None, thread_id: object) -> Path:
        """Return the folder of a run's workspace (not created), or raise SandboxError."""
        if self.one_folder_only:
            if name is not None:
                raise SandboxError(
                    f"workspace {name!r}: this graph runs in the one folder its operator chose; "
                    "a workspace name is not accepted"
                )
            return self.root
        if name is not None:
            return self.root.joinpath(SHARED, *check_name(name))
        return self.root / THREADS / check_thread_id(thread_id)

    def workspace(self, name: str | None, thread_id: object) -> Workspace:
        """Return (creating it if needed) a run's workspace, refusing one a link leads out of."""
        path = self.workspace_path(name, thread_id)
        path.mkdir(parents=True, exist_ok=True)
        if not _is_within(path.resolve(), self.root.resolve()):
            raise SandboxError(f"the workspace {path} leads outside {self.root} (through a link)")
        return Workspace(path)

    def for_run(self, context: Context, config: RunnableConfig | None = None) -> Workspace:
        """Return the workspace of the running graph run: its context's name and thread id."""
        configurable: dict[str, Any] = (config if config is not None else get_config()).get(
            "configurable", {}
        )
        return self.workspace(context.workspace, configurable.get("thread_id"))

    def output_store(self) -> OutputStore:
        """Return the store of spilled step outputs."""
        return OutputStore(self.outputs)
