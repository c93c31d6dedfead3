"""What the run commands do, on the runs API: start, resume, and the offline demo."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from planexec.cli.caller import local_user
from planexec.cli.guard import EXIT_FAILED, UserError
from planexec.cli.hints import failure_hints
from planexec.cli.listing import Session, database, existing, show, threads
from planexec.cli.outcome import print_outcome
from planexec.cli.preflight import missing_inputs, missing_message
from planexec.cli.tooling import run_tools
from planexec.cli.ui import styled
from planexec.cli.watch import Watch, planner_problem
from planexec.context import Context, InvalidContextError
from planexec.errors import ConfigurationError
from planexec.execution.speculation import MODES, SpeculationMode, operator_mode
from planexec.recording import Recording
from planexec.runs import Runs, new_run, sandbox_for
from planexec.runs.request import saved_context, workspace_for
from planexec.tools import ToolRegistry, default_registry
from planexec.tools.sandbox import check_thread_id

__all__ = [
    "NewRun",
    "Recorded",
    "Session",
    "database",
    "demo",
    "resume",
    "show",
    "start",
    "threads",
]
DEMO_NOTE = "this demo's plan was recorded; it uses none"


@dataclass(frozen=True)
class Recorded:
    """The ``--record DIR`` / ``--replay DIR`` of ``run`` or ``resume`` (at most one given)."""

    record: Path | None = None
    replay: Path | None = None

    def open(self) -> Recording | None:
        """Return the recording asked for (None: live calls); refuse both, or a bad folder."""
        if self.record is not None and self.replay is not None:
            raise UserError("give --record DIR or --replay DIR, not both")
        try:
            if self.record is not None:
                return Recording(self.record, "record")
            if self.replay is not None:
                return Recording(self.replay, "replay")
        except ConfigurationError as exc:
            raise UserError(str(exc)) from None
        return None


@dataclass(frozen=True)
class NewRun:
    """The ``run`` command's arguments (``options``: context fields given, None when not)."""

    task: str | None
    plan_file: Path | None
    data: list[Path]
    thread_id: str | None
    folder: str | None
    options: dict[str, Any]
    mcp: Path | None = None
    """The MCP servers file whose tools the run may use (``--mcp``)."""
    tools: list[str] = field(default_factory=list)
    """The ``MODULE:ATTR`` sources of the Python tools the run may use (``--tools``)."""
    recorded: Recorded = field(default_factory=Recorded)
    """Whether the run records its calls, or replays them (``--record``, ``--replay``)."""
    speculate: str | None = None
    """``--speculate``: what may run while the plan is reviewed (None: nothing)."""


def speculation(given: str | None, *, yes: bool) -> SpeculationMode:
    """Return what runs while a plan is reviewed: ``--speculate``'s mode; off with --yes.

    With ``--yes`` nobody reviews: nothing runs before the approval. The CLI is the operator
    of its runs, so the mode is both the operator's (``build_graph(speculate=...)``) and the
    run's wish (``Context.speculate``).
    """
    if yes or given is None:
        return "off"
    try:
        return operator_mode(given)
    except ConfigurationError:
        raise UserError(
            f"--speculate (or $PLANEXEC_SPECULATE) takes "
            f"{' or '.join(m for m in MODES if m != 'off')} (or off), not {given!r}"
        ) from None


def make_context(options: dict[str, Any]) -> Context:
    """Make the run's context from the options given (unset ones keep their defaults)."""
    try:
        return Context(**{k: v for k, v in options.items() if v is not None})
    except InvalidContextError as exc:
        raise UserError(str(exc)) from None


async def start(new: NewRun, db: str, session: Session, *, note: str | None = None) -> int:
    """Check and start a run, showing it live; return the exit code.

    ``note`` says why the run has no planner model (the demo), without asking the model.
    """
    recording = new.recorded.open()  # before anything else: a wrong folder is said at once
    if not new.task and new.plan_file is None:
        raise UserError("give a TASK, or --plan with a plan file")
    if new.task and new.data and Path(new.task).is_file():
        raise UserError(f"{new.task} is a file, not a task: give each data file its own --data")
    speculate = speculation(new.speculate, yes=session.yes)
    options = {**new.options, "speculate": True} if speculate != "off" else new.options
    context, clock = make_context(options), time.monotonic()
    tid = check_thread_id(new.thread_id if new.thread_id is not None else str(uuid.uuid4()))
    folder = workspace_for(new.folder, tid, db).root  # one holding the database: refused now
    for item in new.data:  # before anything is copied or asked of a model
        if not item.is_file():
            raise UserError(f"data file {item} does not exist or is not a file")
    missing_model = note or planner_problem(context)
    if new.task and new.plan_file is None and missing_model:  # no plan could be made
        raise UserError(missing_model)
    if missing_model:  # nothing could revise the given plan: a failed step ends the run
        context = replace(context, max_replans=0)
    with run_tools(new.tools, new.mcp) as tools:
        return await _start(
            new, db, session, context, tid, folder, missing_model, tools, clock, recording,
            speculate,
        )  # fmt: skip


async def _start(
    new: NewRun,
    db: str,
    session: Session,
    context: Context,
    tid: str,
    folder: str | Path,
    missing_model: str | None,
    tools: ToolRegistry | None,
    clock: float,
    recording: Recording | None = None,
    speculate: SpeculationMode = "off",
) -> int:
    opened = Runs.aopen(
        db, tools=tools, caller=local_user(), recording=recording, speculate=speculate
    )
    async with opened as runs:
        if await runs.aget(tid) is not None:  # before any file is copied
            raise UserError(f"thread {tid} already exists; continue it with: planexec resume {tid}")
        request = new_run(
            new.task, plan=new.plan_file, workspace=new.folder, data=new.data,
            thread_id=tid, context=context, db=db, tools=tools,
        )  # fmt: skip
        root = request.sandbox.root if request.sandbox else Path(folder)
        registry = tools if tools is not None else default_registry()
        if request.plan is not None:
            missing = missing_inputs(request.plan, root, registry)
            if missing:
                raise UserError(missing_message(missing, root))
        session.out.print(f"thread {tid} · workspace {root}")
        session.running.thread_id = tid
        watch = Watch(
            session.out, tid, yes=session.yes, judge=context.llm_judge,
            as_json=session.as_json, planner_missing=missing_model,
        )  # fmt: skip
        result = await watch.run(
            runs.astart(request, on_event=watch.progress, decide=watch.reviewer)
        )
    if recording is not None:
        session.out.print(recording.summary(), markup=False, highlight=False)
    wall = time.monotonic() - clock
    hints = failure_hints(result.values, root, registry, missing_model)
    return report(result.values, tid, str(root), session, wall, watch.reviewer.waited, hints)


async def resume(
    thread_id: str,
    db: str,
    session: Session,
    mcp: Path | None = None,
    tools_from: list[str] | None = None,
    recorded: Recorded | None = None,
    speculate: str | None = None,
) -> int:
    """Continue a paused or interrupted run with these tools; return the exit code.

    It records or replays only if ``recorded`` says so (what the run started with is not kept);
    a run started with ``--speculate`` runs read-only steps during a review only if
    ``speculate`` allows it again.
    """
    recording = (recorded or Recorded()).open()
    mode = speculation(speculate, yes=session.yes)
    with run_tools(tools_from or [], mcp) as tools:
        return await _resume(thread_id, db, session, tools, recording, mode)


async def _resume(
    thread_id: str,
    db: str,
    session: Session,
    tools: ToolRegistry | None,
    recording: Recording | None = None,
    speculate: SpeculationMode = "off",
) -> int:
    clock = time.monotonic()
    opened = Runs.aopen(
        db, tools=tools, caller=local_user(), recording=recording, speculate=speculate
    )
    async with opened as runs:
        thread = existing(await runs.aget(thread_id), thread_id, db)
        if not thread.workspace:
            raise UserError(f"thread {thread_id} was not started by the planexec CLI")
        sandbox = sandbox_for(thread.workspace, db, thread.outputs)
        where = f"thread {thread_id} · workspace {sandbox.root}"
        if thread.finished:
            session.out.print(f"{where} · already finished")
            return report(thread.values, thread_id, str(sandbox.root), session)
        session.out.print(f"{where} · resuming")
        session.running.thread_id = thread_id
        context = saved_context(thread.saved_context)
        missing_model = planner_problem(context)
        watch = Watch(
            session.out, thread_id, yes=session.yes, judge=context.llm_judge,
            as_json=session.as_json, planner_missing=missing_model,
        )  # fmt: skip
        result = await watch.run(
            runs.aresume(thread_id, on_event=watch.progress, decide=watch.reviewer)
        )
    if recording is not None:
        session.out.print(recording.summary(), markup=False, highlight=False)
    wall = time.monotonic() - clock
    registry = tools if tools is not None else default_registry()
    hints = failure_hints(result.values, sandbox.root, registry, missing_model)
    waited = watch.reviewer.waited
    return report(result.values, thread_id, str(sandbox.root), session, wall, waited, hints)


async def demo(target: Path | None, db: str, session: Session) -> int:
    """Copy the shipped data and recorded plan into ``target`` and run the plan offline.

    No ``target``: the new thread's own folder, where every run's files go by default.
    """
    files = resources.files("planexec") / "demo"
    tid = str(uuid.uuid4())
    folder = target if target is not None else workspace_for(None, tid, db).root
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sales.csv").write_bytes((files / "sales.csv").read_bytes())
    plan_path = folder / "sales_plan.json"
    plan_path.write_bytes((files / "sales_plan.json").read_bytes())
    session.out.print(
        "planexec demo: this plan was recorded, not planned live; "
        "no model is called and no API key is needed."
    )
    models = {"planner_model": "openai:not-used", "executor_model": "openai:not-used"}
    new = NewRun(None, plan_path, [], tid, str(target) if target is not None else None, models)
    return await start(new, db, session, note=DEMO_NOTE)


def report(
    values: dict[str, Any],
    thread_id: str,
    workspace: str,
    session: Session,
    wall: float | None = None,
    waited: float = 0.0,
    hints: list[str] | None = None,
) -> int:
    """Print the outcome and ``hints``; return the exit code (0 only when every step succeeded).

    The hints say what to do about failed steps; with --json they go to stderr too.
    """
    final = values.get("final") or {}
    if session.as_json:
        steps, usage = values.get("steps", {}), values.get("usage", {})
        result = {"thread_id": thread_id, "workspace": workspace, "final": final}
        result |= {"steps": steps, "usage": usage, "decisions": values.get("decisions", [])}
        print(json.dumps(result, default=str, indent=1))
    else:
        print_outcome(session.out, values, thread_id, workspace, wall, waited)
    for hint in hints or []:
        session.out.print(styled(("hint: ", "yellow"), hint))
    return 0 if final.get("status") == "succeeded" else EXIT_FAILED
