"""Where a run's files live: whoever runs planexec chooses; a client only names a shared folder.

A run's *workspace* is the one folder its tools may read and write. Whoever runs planexec
chooses it: one folder for every run (:meth:`Sandbox.one_folder`: ``build_graph(workspace=PATH)``,
``new_run(workspace=PATH)``, ``planexec run --workspace PATH``), or a root holding a folder per
thread (``build_graph(workspace_root=...)``, else ``$PLANEXEC_WORKSPACE_ROOT``, else
``./planexec-workspaces``)::

    ROOT/threads/THREAD_ID/   a thread's own workspace (the default: threads never share files)
    ROOT/shared/NAME/         the workspace of every run whose context names NAME (shared_folder)
    ROOT/.planexec/outputs/   spilled step outputs (inside no workspace: tools cannot reach them)

A one-folder sandbox keeps its spilled outputs in a folder outside that one.

:meth:`Sandbox.workspace_path` is the one place a run's workspace is decided: admission asks
it before a run starts, every node when it needs the folder.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from planexec.context import (
    FOLDER_RULE,
    FOLDER_SEGMENT,
    Context,
    InvalidContextError,
    shared_folder_parts,
)
from planexec.errors import ConfigurationError
from planexec.storage.outputs import OutputStore
from planexec.tools.workspace import Workspace

ROOT_ENV = "PLANEXEC_WORKSPACE_ROOT"
OUTPUTS_ENV = "PLANEXEC_OUTPUTS_DIR"
DEFAULT_ROOT = "planexec-workspaces"
THREADS, SHARED = "threads", "shared"
INTERNAL = ".planexec"


class SandboxError(ConfigurationError, ValueError):
    """A workspace name, thread id or sandbox setting is refused; nothing was read or written."""


def check_name(name: object) -> tuple[str, ...]:
    """Return the parts of a shared folder's name, or raise SandboxError saying why not.

    The rules are :func:`planexec.context.shared_folder_parts` (a run's context checks them
    when it is made).
    """
    if not isinstance(name, str):
        raise SandboxError(f"the shared folder's name must be text, not {type(name).__name__}")
    try:
        return shared_folder_parts(name)
    except ValueError as exc:
        raise SandboxError(f"shared folder {name!r}: {exc}") from None


def check_thread_id(thread_id: object) -> str:
    """Return a thread id fit to name a folder, or raise SandboxError (ids that are paths, too)."""
    if isinstance(thread_id, uuid.UUID):
        return str(thread_id)
    if thread_id is None:
        raise SandboxError(
            "this run has no thread id, so it has no workspace of its own: pass "
            "config={'configurable': {'thread_id': ...}} or a shared_folder in the context"
        )
    if isinstance(thread_id, int) and not isinstance(thread_id, bool) and thread_id >= 0:
        return str(thread_id)
    if isinstance(thread_id, str) and FOLDER_SEGMENT.fullmatch(thread_id):
        return thread_id
    raise SandboxError(
        f"thread id {thread_id!r} cannot name a workspace folder: use {FOLDER_RULE} "
        "(a UUID is fine)"
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
        """Return a sandbox in which every run works in ``folder`` itself: its workspace.

        What ``build_graph(workspace=PATH)``, ``new_run(workspace=PATH)`` and the CLI's
        ``--workspace`` make. Spilled outputs go to ``outputs`` (default:
        :func:`default_outputs_dir`), which must not overlap it; a context's shared_folder is
        refused.
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
        """Return the folder of a run's workspace (not created), or raise SandboxError.

        ``name``: the run's shared folder (its context's ``shared_folder``), if it names one.
        """
        if self.one_folder_only:
            if name is not None:
                raise SandboxError(
                    f"shared_folder {name!r}: this graph runs in the one folder its operator "
                    f"chose ({self.root}); a shared folder is not accepted"
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
        """Return the workspace of the running graph run: its shared folder, or its thread's."""
        return self.workspace(context.shared_folder, thread_of(config))

    def check_run(self, context: Context, config: RunnableConfig | None) -> None:
        """Refuse a run whose workspace cannot be (a bad thread id, a refused shared folder).

        Reads and writes nothing: admission asks it before a run starts. A shared folder this
        sandbox refuses is the context's error (:class:`InvalidContextError`).
        """
        if context.shared_folder is None:
            self.workspace_path(None, thread_of(config))
            return
        try:
            self.workspace_path(context.shared_folder, None)
        except SandboxError as exc:
            raise InvalidContextError(f"invalid context: {exc}") from None

    def output_store(self) -> OutputStore:
        """Return the store of spilled step outputs."""
        return OutputStore(self.outputs)


def thread_of(config: RunnableConfig | None = None) -> object:
    """Return the thread id of ``config`` (else of the running graph run), or None."""
    configurable: dict[str, Any] = (config if config is not None else get_config()).get(
        "configurable", {}
    )
    return configurable.get("thread_id")
