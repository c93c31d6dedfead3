"""A new run, checked before anything is saved: its thread id, folder, context and plan."""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from planexec.context import Context
from planexec.errors import WorkspaceError
from planexec.plan import PlanValidationError, goal_of_task, to_doc, validate_plan
from planexec.review.identity import CALLER_KEY
from planexec.runs.db import RunError, is_postgres
from planexec.runs.types import Caller
from planexec.state import PlanDoc
from planexec.tools import ToolRegistry, ToolsLike, Workspace, default_registry
from planexec.tools.sandbox import Sandbox, check_thread_id

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class RunRequest:
    """A run to start: made by :func:`new_run`, started by ``Runs.start``/``astart``."""

    thread_id: str
    task: str
    context: Context
    sandbox: Sandbox | None = None
    plan: PlanDoc | None = None

    def config(self, caller: Caller | None = None) -> RunnableConfig:
        """Return the run's config: its thread, who drives it, the settings a resume needs.

        ``caller`` (the :class:`Runs`' caller) goes to ``configurable["planexec_caller"]``,
        where the approval reads who answers; None: the answer's own ``"by"`` says it.
        """
        metadata = run_settings(self.context, self.sandbox)
        configurable: dict[str, Any] = {"thread_id": self.thread_id}
        if caller is not None:
            configurable[CALLER_KEY] = {"id": caller["id"], "source": caller["source"]}
        return {"configurable": configurable, "metadata": metadata}


def new_run(
    task: str | None = None,
    *,
    plan: PathLike | Mapping[str, Any] | None = None,
    workspace: PathLike | None = None,
    data: Iterable[PathLike] = (),
    thread_id: str | None = None,
    context: Context | None = None,
    db: str | None = None,
    tools: ToolsLike | None = None,
) -> RunRequest:
    """Check a new run: ``task`` for the planner, or ``plan`` (a file or a dict) to approve.

    ``workspace`` is the one folder its tools may use (a path; copies of ``data`` go there);
    without it, the thread's own folder below the workspace root, where ``build_graph`` puts
    it (:func:`workspace_for`), or the context's ``shared_folder`` there. ``db`` (the run
    database) may not lie inside the workspace, where tools could change it.

    Example::

        request = new_run("Summarise sales.csv", workspace="ws", data=["sales.csv"])
    """
    tid = check_thread_id(thread_id if thread_id is not None else str(uuid.uuid4()))
    ctx = context if context is not None else Context()
    named = workspace is None and ctx.shared_folder is not None  # build_graph's layout
    sandbox = None if named else workspace_for(workspace, tid, db)
    registry = ToolRegistry.of(tools) if tools is not None else default_registry()
    goal = goal_of_task(task) if task else None  # of a plan that states none
    if isinstance(plan, Mapping):
        doc: PlanDoc | None = plan_doc(plan, registry, ctx.max_steps, "plan", goal)
    else:
        doc = (
            load_plan_file(Path(plan), registry, ctx.max_steps, goal) if plan is not None else None
        )
    if not task and doc is None:
        raise RunError("give a task, or a plan")
    files = [Path(item) for item in data]
    if files:
        if sandbox is None:
            raise RunError("data files need a workspace folder to be copied into")
        copy_data(files, sandbox.root)
    return RunRequest(tid, task or (doc["goal"] if doc else ""), ctx, sandbox, doc)


def workspace_for(folder: PathLike | None, thread_id: str, db: str | None) -> Sandbox:
    """Return the sandbox of a new run: ``folder``, else its thread's own folder.

    The one default place of a run's files: ``ROOT/threads/THREAD_ID`` with spilled outputs in
    ``ROOT/.planexec/outputs``, ``ROOT`` being ``$PLANEXEC_WORKSPACE_ROOT``, else
    ``./planexec-workspaces`` — where ``build_graph`` keeps a thread's files. A run database
    inside the folder is refused (:func:`sandbox_for`).
    """
    if folder is not None:
        return sandbox_for(folder, db)
    root = Sandbox.at()
    return sandbox_for(root.workspace_path(None, thread_id), db, str(root.outputs))


def sandbox_for(folder: PathLike, db: str | None, outputs: str | None = None) -> Sandbox:
    """Return a one-folder sandbox, refusing a run database inside it (tools could change it)."""
    sandbox = Sandbox.one_folder(folder, outputs=outputs)
    if db and not is_postgres(db) and Path(db).expanduser().resolve().is_relative_to(sandbox.root):
        raise RunError(
            f"the run database {db} is inside the workspace {sandbox.root}: tools could read or "
            "change it; use another --db or --workspace"
        )
    return sandbox


def plan_doc(
    data: object, tools: ToolRegistry, max_steps: int, name: str, goal: str | None = None
) -> PlanDoc:
    """Validate a plan given as JSON data; return it as version 1, or raise RunError.

    ``goal`` is the goal of a plan that states none (the task's); without it one must.
    """
    try:
        return to_doc(validate_plan(data, tools, max_steps=max_steps, goal=goal), version=1)
    except PlanValidationError as exc:
        raise RunError(f"{name} is invalid: " + "; ".join(exc.errors)) from None


def load_plan_file(
    path: Path, tools: ToolRegistry, max_steps: int, goal: str | None = None
) -> PlanDoc:
    """Read and validate a plan file (JSON), or raise RunError in one line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunError(f"cannot read plan file {path}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, not UTF-8, or a number past Python's digit limit
        raise RunError(f"plan file {path} is not valid JSON: {exc}") from None
    return plan_doc(data, tools, max_steps, f"plan file {path}", goal)


def copy_data(files: list[Path], workspace: Path) -> None:
    """Copy the user's data files into the run's workspace; never overwrite a different file.

    Everything is checked before the first copy: a refusal leaves every folder as it was.
    The copies are written as tools write files (:meth:`Workspace.open_write`), so a link in
    the workspace is never written through.
    """
    named: dict[str, Path] = {}
    there = Workspace(workspace) if workspace.is_dir() else None
    present: set[str] = set()
    for item in files:
        if not item.is_file():
            raise RunError(f"data file {item} does not exist or is not a file")
        if item.name in named and not named[item.name].samefile(item):
            raise RunError(
                f"data files {named[item.name]} and {item} have the same name: both would be "
                f"{item.name} in the workspace; rename one"
            )
        try:
            found = there.info(item.name) if there is not None else None
            if found is not None and not (
                stat.S_ISREG(found.st_mode) and _same(item, there, item.name)
            ):
                raise RunError(
                    f"the workspace {workspace} already has a different {item.name}: copying "
                    f"{item} would overwrite it; rename one, or use another workspace"
                )
        except WorkspaceError as exc:
            raise RunError(f"cannot copy {item} into the workspace {workspace}: {exc}") from None
        if found is not None:
            present.add(item.name)  # it already holds the same bytes
        named[item.name] = item
    into = Workspace(workspace)
    for name, item in named.items():
        if name not in present:
            try:
                with item.open("rb") as source, into.open_write(name) as copy:
                    shutil.copyfileobj(source, copy)
            except WorkspaceError as exc:
                raise RunError(
                    f"cannot copy {item} into the workspace {workspace}: {exc}"
                ) from None


def _same(item: Path, workspace: Workspace | None, name: str) -> bool:
    """Say whether the workspace's file ``name`` holds the same bytes as ``item``."""
    if workspace is None:
        return False
    with item.open("rb") as mine, workspace.open_read(name) as theirs:
        while True:
            chunk = mine.read(1 << 20)
            if chunk != theirs.read(1 << 20):
                return False
            if not chunk:
                return True


def run_settings(context: Context, sandbox: Sandbox | None) -> dict[str, Any]:
    """Return what a later resume or show needs to continue the run the same way.

    Checkpoint metadata keeps only scalar values, so the context travels as a JSON string;
    the run's folder and its outputs folder as plain paths.
    """
    settings = {"planexec_context": json.dumps(asdict(context))}
    if sandbox is not None:
        settings["planexec_workspace"] = str(sandbox.root)
        settings["planexec_outputs"] = str(sandbox.outputs)
    return settings


def saved_context(saved: Mapping[str, Any]) -> Context:
    """Rebuild a run's context from its saved settings (fields it no longer has are dropped).

    A run saved before ``workspace`` was renamed ``shared_folder`` keeps its shared folder.
    """
    names = {f.name for f in fields(Context)}
    old = saved.get("workspace")
    renamed = {"shared_folder": old} if old and not os.path.isabs(str(old)) else {}
    return Context(**renamed, **{k: v for k, v in saved.items() if k in names})
