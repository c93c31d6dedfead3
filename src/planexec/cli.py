"""The ``planexec`` command: plan, approve and run tasks on your files from the terminal."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sqlite3
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext, redirect_stdout
from dataclasses import asdict, fields
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import click
import psycopg
import typer
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt
from rich.table import Table
from rich.tree import Tree

from planexec.context import Context, InvalidContextError
from planexec.errors import PlanexecError
from planexec.graph import build_graph
from planexec.outputs import OutputStore, output_of
from planexec.persistence import async_postgres_saver, async_sqlite_saver
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.sandbox import Sandbox, check_thread_id, default_outputs_dir
from planexec.scrubbed_io import scrubbed_stdio
from planexec.secrets import mask_urls, register_url_secrets
from planexec.state import PlanDoc, StepDoc, StepRecord
from planexec.store_guard import CheckpointStoreError, describe
from planexec.tools import default_registry

app = typer.Typer(
    help="Turn a task into a plan you approve, then run it: in parallel, checked, replanned.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "succeeded": "green",
    "failed": "red",
    "skipped": "magenta",
}
EXIT_FAILED, EXIT_ERROR = 1, 2


class UserError(PlanexecError):
    """A mistake the user can fix; printed as one line."""


class Paused(PlanexecError):
    """Nobody answered the approval prompt; the run waits in its thread."""


def default_db() -> str:
    """Where runs are kept unless --db says otherwise (PLANEXEC_DB, else the user data dir)."""
    if os.environ.get("PLANEXEC_DB"):
        return os.environ["PLANEXEC_DB"]
    from platformdirs import user_data_path

    return str(user_data_path("planexec") / "runs.sqlite")


def redact(db: str) -> str:
    """Hide the passwords of a database URL (``postgresql://user:***@host/db``)."""
    return mask_urls(db)


def is_postgres(db: str) -> bool:
    """Say whether ``db`` names a PostgreSQL database rather than a SQLite file."""
    return db.startswith(("postgres://", "postgresql://"))


def sandbox_for(folder: str | Path, db: str, outputs: str | None = None) -> Sandbox:
    """Return the CLI's sandbox: the user's folder, planexec's database and outputs outside it.

    The tools may read and write anything in the folder, so a run database or outputs folder
    inside it would let a step rewrite planexec's own records: both are refused in one line.
    """
    sandbox = Sandbox.one_folder(folder, outputs=outputs)
    if not is_postgres(db) and Path(db).expanduser().resolve().is_relative_to(sandbox.root):
        raise UserError(
            f"the run database {db} is inside the workspace {sandbox.root}: tools could read or "
            "change it; use another --db or --workspace"
        )
    return sandbox


@asynccontextmanager
async def open_saver(db: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the checkpoint store: a SQLite file, or PostgreSQL for ``postgresql://`` URLs."""
    register_url_secrets(db)  # scrubbed from everything printed, whatever quotes it
    async with AsyncExitStack() as stack:
        try:
            if is_postgres(db):
                saver: BaseCheckpointSaver[Any] = await stack.enter_async_context(
                    async_postgres_saver(db)
                )
            else:
                saver = await stack.enter_async_context(async_sqlite_saver(db))
        except (ImportError, OSError, sqlite3.Error, psycopg.Error) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"cannot open the run database {redact(db)}: {reason}") from None
        yield saver


class Session:
    """One CLI invocation: where output goes, and how approvals are answered."""

    def __init__(self, *, yes: bool, as_json: bool) -> None:
        """Send human output to stderr when stdout carries JSON."""
        self.yes = yes
        self.as_json = as_json
        self.out = Console(stderr=as_json, highlight=False, soft_wrap=True)
        self.started: dict[int, float] = {}
        self.thread_id = ""

    def plan(self, plan: PlanDoc, records: dict[str, StepRecord] | None = None) -> None:
        """Show a plan as a table and its dependency graph as a tree."""
        records = records or {}
        table = Table(
            title=f"Plan v{plan['version']}: {escape(plan['goal'])}", title_justify="left"
        )
        for column in ("id", "tool", "args", "description", "after", "status"):
            table.add_column(column, overflow="fold")
        for step in plan["steps"]:  # every field the approval's digest covers is shown
            status = records.get(str(step["id"]), {}).get("status", "pending")
            expected = step.get("expected_output") or ""
            table.add_row(
                str(step["id"]),
                tool_cell(step),
                escape(json.dumps(step["args"], ensure_ascii=False)),
                escape(step["description"] + (f" → {expected}" if expected else "")),
                ", ".join(map(str, step["depends_on"])) or "-",
                f"[{STATUS_STYLE.get(status, '')}]{status}[/]",
            )
        self.out.print(table)
        tree = Tree("dependencies")
        children: dict[int, list[int]] = {}
        for step in plan["steps"]:
            for dep in step["depends_on"]:
                children.setdefault(dep, []).append(step["id"])
        known = {s["id"] for s in plan["steps"]}

        def grow(node: Tree, sid: int, seen: frozenset[int]) -> None:
            for child in children.get(sid, []):
                if child not in seen:
                    grow(node.add(f"step {child}"), child, seen | {child})

        for step in plan["steps"]:
            if not [d for d in step["depends_on"] if d in known]:
                grow(tree.add(f"step {step['id']}"), step["id"], frozenset({step["id"]}))
        self.out.print(tree)

    def progress(self, event: dict[str, Any]) -> None:
        """Print one line per step event, with elapsed time."""
        sid = event.get("step")
        kind = event.get("event")
        if kind == "step_started":
            self.started[sid] = time.monotonic()  # type: ignore[index]
            tool = escape(str(event.get("tool") or "model"))
            self.out.print(f"  [yellow]▶ step {sid}[/] running ({tool})")
            return
        elapsed = time.monotonic() - self.started.get(sid, time.monotonic())  # type: ignore[arg-type]
        if kind == "step_finished":
            self.out.print(
                f"  [green]✔ step {sid}[/] done in {elapsed:.2f}s: "
                f"{escape(str(event.get('summary', ''))[:100])}"
            )
        elif kind == "step_failed":
            self.out.print(
                f"  [red]✘ step {sid}[/] failed after {elapsed:.2f}s: "
                f"{escape(str(event.get('error')))}"
            )
        elif kind == "step_skipped":
            reason = escape(str(event.get("reason")))
            self.out.print(f"  [magenta]↷ step {sid}[/] skipped: {reason}")
        elif kind == "step_retry":
            self.out.print(
                f"  [yellow]↻ step {sid}[/] retrying after: {escape(str(event.get('error')))}"
            )
        elif kind == "tool_call_refused":
            self.out.print(
                f"  [red]⊘ step {sid}[/] refused a call to {escape(str(event.get('tool')))}: "
                "not a tool of this step"
            )

    def decide(self, request: dict[str, Any]) -> dict[str, Any]:
        """Ask the reviewer about a plan (or approve it with --yes)."""
        self.plan(request["plan"])
        if request.get("error"):
            self.out.print(f"[red]refused:[/] {escape(str(request['error']))}")
        for problem in request.get("problems") or []:
            self.out.print(f"[red]invalid:[/] {escape(str(problem))}")
        if request.get("side_effect_tools"):
            tools = ", ".join(map(str, request["side_effect_tools"]))
            self.out.print("tools that write or send: " + escape(tools))
        names = {"version": request["version"], "digest": request["digest"]}
        if self.yes:
            self.out.print("[green]approved[/] (--yes)")
            return {"action": "approve", **names}
        try:
            return {**self._ask(request), **names}  # an answer names the plan it is about
        except EOFError:
            raise Paused(
                f"no answer on stdin; the run is paused. Continue it with: "
                f"planexec resume {self.thread_id}"
            ) from None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        while True:
            choice = Prompt.ask(
                "approve, edit, reject or cancel?",
                console=self.out,
                choices=["approve", "edit", "reject", "cancel"],
                default="approve",
            )
            if choice == "approve":
                return {"action": "approve"}
            if choice == "cancel":
                return {"action": "cancel", "reason": "cancelled at the prompt"}
            if choice == "reject":
                feedback = Prompt.ask("what should change?", console=self.out).strip()
                if feedback:
                    return {"action": "reject", "feedback": feedback}
                continue
            edited = edit_in_editor(request["plan"])
            if edited is None:
                self.out.print("[red]the edited file is not valid JSON[/]; asking again")
                continue
            return {"action": "edit", "plan": edited}


def tool_cell(step: StepDoc) -> str:
    """Return the plan table's tool cell: the step's tool, or the tools its model may call."""
    if step["tool"]:
        return escape(step["tool"])
    listed = step.get("tools") or []
    return escape(f"(model: {', '.join(listed)})" if listed else "(model, no tools)")


def edit_in_editor(plan: PlanDoc) -> dict[str, Any] | None:
    """Open $VISUAL/$EDITOR on the plan's JSON; return what was saved (None if it is not JSON)."""
    text = json.dumps({"goal": plan["goal"], "steps": plan["steps"]}, indent=2)
    edited = click.edit(text, extension=".json", require_save=False)
    try:
        loaded = json.loads(edited if edited is not None else text)
    except json.JSONDecodeError:
        return None
    return loaded if isinstance(loaded, dict) else None


async def drive(
    graph: Any, config: RunnableConfig, context: Context, first: Any, session: Session
) -> dict[str, Any]:
    """Stream a run, answering approval interrupts, until it ends; return the final state."""
    payload = first
    while True:
        request = None
        # with --json, stdout carries only the result: whatever tools print goes to stderr
        with redirect_stdout(sys.stderr) if session.as_json else nullcontext():
            async for mode, chunk in graph.astream(
                payload, config, context=context, stream_mode=["custom", "updates"]
            ):
                if mode == "custom":
                    session.progress(chunk)
                elif "__interrupt__" in chunk:
                    request = chunk["__interrupt__"][0].value
        if request is None:
            break
        payload = Command(resume=session.decide(request))
    values: dict[str, Any] = (await graph.aget_state(config)).values
    return values


def report(values: dict[str, Any], thread_id: str, workspace: str, session: Session) -> int:
    """Print the outcome; return the exit code (0 only when every step succeeded)."""
    final = values.get("final") or {}
    status = final.get("status", "unfinished")
    if session.as_json:
        print(
            json.dumps(
                {
                    "thread_id": thread_id,
                    "workspace": workspace,
                    "final": final,
                    "steps": values.get("steps", {}),
                    "usage": values.get("usage", {}),
                },
                default=str,
                indent=1,
            )
        )
    else:
        style = "green" if status == "succeeded" else "red"
        session.out.print(f"\n[{style}]{status}[/] · thread {thread_id}")
        if final.get("answer"):
            session.out.print(escape(final["answer"]))
        for artifact in final.get("artifacts", []):
            session.out.print(f"  → {escape(str(Path(workspace, artifact)))}")
    return 0 if status == "succeeded" else EXIT_FAILED


def load_plan_file(path: Path, context: Context) -> PlanDoc:
    """Read and validate a plan file (JSON), or raise UserError in one line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read plan file {path}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, not UTF-8, or a number past Python's digit limit
        raise UserError(f"plan file {path} is not valid JSON: {exc}") from None
    try:
        plan = validate_plan(data, default_registry(), max_steps=context.max_steps)
    except PlanValidationError as exc:
        raise UserError(f"plan file {path} is invalid: " + "; ".join(exc.errors)) from None
    return to_doc(plan, version=1)


def copy_data(files: list[Path], workspace: Path) -> None:
    """Copy the user's data files into the run's workspace."""
    workspace.mkdir(parents=True, exist_ok=True)
    for item in files:
        if not item.is_file():
            raise UserError(f"data file {item} does not exist or is not a file")
        shutil.copy(item, workspace / item.name)


def run_settings(context: Context, sandbox: Sandbox) -> dict[str, Any]:
    """Return what a later ``resume`` or ``show`` needs to continue the run the same way.

    Checkpoint metadata keeps only scalar values, so the settings travel as a JSON string;
    the run's folder and its outputs folder as plain paths.
    """
    return {
        "planexec_context": json.dumps(asdict(context)),
        "planexec_workspace": str(sandbox.root),
        "planexec_outputs": str(sandbox.outputs),
    }


async def _run(
    task: str | None,
    plan_file: Path | None,
    data: list[Path],
    thread_id: str,
    db: str,
    context: Context,
    session: Session,
    folder: str | None = None,
) -> int:
    check_thread_id(thread_id)  # before it names a folder: "/" or ".." must not
    sandbox = sandbox_for(folder if folder is not None else Path("planexec-runs") / thread_id, db)
    doc = load_plan_file(plan_file, context) if plan_file else None
    if not task and doc is None:
        raise UserError("give a TASK, or --plan with a plan file")
    copy_data(data, sandbox.root)
    config: RunnableConfig = {
        "configurable": {"thread_id": thread_id},
        "metadata": run_settings(context, sandbox),
    }
    session.thread_id = thread_id
    session.out.print(f"thread {thread_id} · workspace {sandbox.root}")
    async with open_saver(db) as saver:
        # the CLI's user is the operator of their own runs: --approval sets the policy
        graph = build_graph(checkpointer=saver, sandbox=sandbox, approval=context.approval)
        if (await graph.aget_state(config)).values:
            raise UserError(f"thread {thread_id} already exists; use `planexec resume {thread_id}`")
        first: Any = {"task": task or (doc["goal"] if doc else "")}
        if doc is not None:  # a plan file goes to approval like any plan (no planner call)
            await graph.aupdate_state(
                config, {"task": first["task"], "plan": doc}, as_node="planner"
            )
            first = None
        values = await drive(graph, config, context, first, session)
    return report(values, thread_id, str(sandbox.root), session)


def _context(
    approval: str | None,
    planner: str | None,
    executor: str | None,
    evaluator: str | None,
    judge: bool,
    max_replans: int | None,
) -> Context:
    extra: dict[str, Any] = {"llm_judge": judge}
    if max_replans is not None:
        extra["max_replans"] = max_replans
    for key, value in (
        ("approval", approval),
        ("planner_model", planner),
        ("executor_model", executor),
        ("evaluator_model", evaluator),
    ):
        if value:
            extra[key] = value
    try:
        return Context(**extra)
    except InvalidContextError as exc:  # made before _guard runs: same one line, exit 2
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_ERROR) from None


def _guard(coro: Any) -> None:
    """Run a command; a user's mistake or a database failure prints one line, never a traceback.

    Everything printed meanwhile (the command's lines, what tools print, errors, a crash's
    traceback) goes through ``scrubbed_stdio``: no secret value or database password. A
    database failure exits 2 like a mistake: the run stopped where its last saved checkpoint
    is, and ``planexec resume`` continues it from there once the database is back.
    """
    # psycopg logs a warning of its own when a dead connection is torn down: one line is ours
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    with scrubbed_stdio():
        errors = Console(stderr=True, highlight=False, soft_wrap=True)
        try:
            code = asyncio.run(coro)
        except Paused as exc:
            errors.print(escape(str(exc)))
            code = EXIT_FAILED
        except CheckpointStoreError as exc:
            errors.print(
                f"[red]error:[/] {escape(str(exc))} Continue with `planexec resume THREAD_ID` "
                "(the thread shown above)."
            )
            code = EXIT_ERROR
        except (PlanexecError, OSError) as exc:
            errors.print(f"[red]error:[/] {escape(str(exc))}")
            code = EXIT_ERROR
        except (psycopg.Error, sqlite3.Error) as exc:
            errors.print(
                f"[red]error:[/] the run database failed ({escape(describe(exc))}); what was "
                "saved before is kept: continue with `planexec resume THREAD_ID` (the thread "
                "shown above) when it works again"
            )
            code = EXIT_ERROR
        except KeyboardInterrupt:
            code = 130
        except Exception:  # noqa: BLE001 - a bug: its traceback, scrubbed like all output
            sys.stderr.write(traceback.format_exc())
            code = EXIT_FAILED
    raise typer.Exit(code)


DbOption = Annotated[str | None, typer.Option("--db", help="SQLite file or postgresql:// URL.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Approve plans without asking.")]


@app.command()
def run(
    task: Annotated[str | None, typer.Argument(help="What to do, in your words.")] = None,
    data: Annotated[
        list[Path] | None, typer.Option("--data", help="Data file to copy into the workspace.")
    ] = None,  # noqa: E501
    plan: Annotated[
        Path | None, typer.Option("--plan", help="Run this plan file; no planner call.")
    ] = None,  # noqa: E501
    yes: YesOption = False,
    thread_id: Annotated[str | None, typer.Option("--thread-id", help="Id of the new run.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace", help="Folder the tools may use (default ./planexec-runs/THREAD)."
        ),
    ] = None,  # noqa: E501
    approval: Annotated[
        str | None, typer.Option(help="Approval policy: always, first or never.")
    ] = None,  # noqa: E501
    planner_model: Annotated[str | None, typer.Option(help="e.g. openai:gpt-4.1")] = None,
    executor_model: Annotated[str | None, typer.Option(help="e.g. openai:gpt-4.1-mini")] = None,
    evaluator_model: Annotated[str | None, typer.Option(help="Model of the LLM judge.")] = None,
    judge: Annotated[bool, typer.Option("--judge", help="Let an LLM judge the results.")] = False,
    max_replans: Annotated[
        int | None, typer.Option(help="Most plan revisions after failures.")
    ] = None,  # noqa: E501
) -> None:
    """Plan TASK, show the plan for approval, then run it with live progress."""
    tid = thread_id if thread_id is not None else str(uuid.uuid4())
    context = _context(approval, planner_model, executor_model, evaluator_model, judge, max_replans)
    session = Session(yes=yes, as_json=as_json)
    _guard(_run(task, plan, data or [], tid, db or default_db(), context, session, workspace))


async def _resume(thread_id: str, db: str, session: Session) -> int:
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    session.thread_id = thread_id
    async with open_saver(db) as saver:
        graph = build_graph(checkpointer=saver)
        state = await graph.aget_state(config)
        if not state.values:
            raise UserError(f"no run with thread id {thread_id} in {redact(db)}")
        meta = state.metadata or {}
        saved = json.loads(str(meta.get("planexec_context") or "{}"))
        # runs started before planexec_workspace existed kept their folder in the context
        folder = meta.get("planexec_workspace") or saved.pop("workspace", None)
        if not folder:
            raise UserError(f"thread {thread_id} was not started by the planexec CLI")
        sandbox = sandbox_for(str(folder), db, _text(meta.get("planexec_outputs")))
        names = {f.name for f in fields(Context)} - {"workspace"}
        context = Context(**{k: v for k, v in saved.items() if k in names})
        config["metadata"] = run_settings(context, sandbox)
        if not state.next:
            session.out.print(f"thread {thread_id} has already finished")
            return report(state.values, thread_id, str(sandbox.root), session)
        graph = build_graph(checkpointer=saver, sandbox=sandbox, approval=context.approval)
        values = await drive(graph, config, context, None, session)
    return report(values, thread_id, str(sandbox.root), session)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@app.command()
def resume(
    thread_id: Annotated[str, typer.Argument(help="Thread id of the run.")],
    yes: YesOption = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a paused or interrupted run where it stopped."""
    _guard(_resume(thread_id, db or default_db(), Session(yes=yes, as_json=as_json)))


async def _show(thread_id: str, db: str, session: Session, step: int | None = None) -> int:
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    async with open_saver(db) as saver:
        graph = build_graph(checkpointer=saver)
        state = await graph.aget_state(config)
    values = state.values
    if not values:
        raise UserError(f"no run with thread id {thread_id} in {redact(db)}")
    if step is not None:
        record = values.get("steps", {}).get(str(step))
        if record is None:
            raise UserError(f"run {thread_id} has no step {step}")
        folder = _text((state.metadata or {}).get("planexec_outputs"))
        output = output_of(record, OutputStore(folder or default_outputs_dir()))
        print(json.dumps(output, ensure_ascii=False, indent=1))
        return 0
    if session.as_json:
        print(
            json.dumps(
                {"thread_id": thread_id, "next": list(state.next), **values}, default=str, indent=1
            )
        )
        return 0
    out = session.out
    out.print(
        f"[bold]{escape(str(values.get('task')))}[/] · thread {thread_id} · "
        f"next: {', '.join(state.next) or 'done'}"
    )
    if values.get("plan"):
        session.plan(values["plan"], values.get("steps", {}))
        timings = Table(title="steps", title_justify="left")
        for column in ("id", "status", "attempts", "seconds", "summary / error"):
            timings.add_column(column, overflow="fold")
        for sid, rec in values.get("steps", {}).items():
            took = (
                (rec["ended_at"] - rec["started_at"])
                if rec.get("ended_at") and rec.get("started_at")
                else None
            )
            timings.add_row(
                sid,
                rec.get("status", ""),
                str(rec.get("attempts", 0)),
                f"{took:.2f}" if took is not None else "-",
                escape((rec.get("error") or rec.get("summary", ""))[:120]),
            )
        out.print(timings)
    for rev in values.get("revisions", []):
        out.print(f"revision v{rev['version']}: {escape(rev['reason'])}")
    usage = values.get("usage", {})
    for role, use in usage.items():
        out.print(
            f"{role}: {use['calls']} calls, {use['input_tokens']} prompt tokens, "
            f"{use['output_tokens']} completion tokens"
        )
    if values.get("final"):
        out.print(f"final: {values['final']['status']}")
    return 0


@app.command()
def show(
    thread_id: Annotated[str, typer.Argument(help="Thread id of the run.")],
    db: DbOption = None,
    as_json: JsonOption = False,
    output: Annotated[
        int | None, typer.Option("--output", help="Print this step's whole output as JSON.")
    ] = None,
) -> None:
    """Show a run: its plan, revisions, step statuses and timings, and token use."""
    _guard(_show(thread_id, db or default_db(), Session(yes=False, as_json=as_json), output))


async def _threads(db: str, limit: int, session: Session) -> int:
    rows: dict[str, dict[str, Any]] = {}
    async with open_saver(db) as saver:
        graph = build_graph(checkpointer=saver)
        recent: list[str] = []
        async for item in saver.alist(None, limit=2000):  # newest checkpoints first
            tid = item.config["configurable"]["thread_id"]
            if tid not in recent:
                recent.append(tid)
        for tid in recent[:limit]:  # read states only once the listing cursor is closed
            state = await graph.aget_state({"configurable": {"thread_id": tid}})
            final = state.values.get("final") or {}
            waiting = "waiting: " + ", ".join(state.next) if state.next else "unknown"
            rows[tid] = {
                "thread_id": tid,
                "task": state.values.get("task", ""),
                "status": final.get("status") or waiting,
                "updated": state.created_at,
            }
    if session.as_json:
        print(json.dumps(list(rows.values()), indent=1, default=str))
        return 0
    table = Table(title=f"recent runs in {escape(redact(db))}", title_justify="left")
    for column in ("thread", "updated", "status", "task"):
        table.add_column(column, overflow="fold")
    for row in rows.values():
        status, task = escape(row["status"]), escape(row["task"][:80])
        table.add_row(row["thread_id"], str(row["updated"])[:19], status, task)
    session.out.print(table)
    return 0


@app.command()
def threads(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="How many runs to list.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List recent runs, newest first."""
    _guard(_threads(db or default_db(), limit, Session(yes=False, as_json=as_json)))


@app.command()
def demo(
    yes: YesOption = False,
    workspace: Annotated[
        str, typer.Option(help="Folder for the demo's data and output.")
    ] = "planexec-demo",  # noqa: E501
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Analyse a shipped sales CSV offline, from a recorded plan (no model, no API key)."""
    session = Session(yes=yes, as_json=as_json)
    files = resources.files("planexec") / "demo"
    target = Path(workspace)
    target.mkdir(parents=True, exist_ok=True)
    (target / "sales.csv").write_bytes((files / "sales.csv").read_bytes())
    plan_path = target / "sales_plan.json"
    plan_path.write_bytes((files / "sales_plan.json").read_bytes())
    session.out.print(
        "[bold]planexec demo[/]: this plan was [bold]recorded[/], not planned live; "
        "no model is called and no API key is needed."
    )
    context = Context(planner_model="openai:not-used", executor_model="openai:not-used")
    tid = str(uuid.uuid4())
    _guard(_run(None, plan_path, [], tid, db or default_db(), context, session, str(target)))


def main() -> None:
    """Entry point of ``python -m planexec``."""
    app(prog_name="planexec")


if __name__ == "__main__":
    main()
