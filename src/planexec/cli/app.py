"""The ``planexec`` command's typer app: its commands and options (the work is in actions)."""

from __future__ import annotations

import uuid
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer

from planexec.cli import actions
from planexec.cli.actions import NewRun, Session
from planexec.cli.guard import error_line, guard
from planexec.context import Context, InvalidContextError
from planexec.runs import default_db

app = typer.Typer(
    help="Turn a task into a plan you approve, then run it: in parallel, checked, replanned.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[str | None, typer.Option("--db", help="SQLite file or postgresql:// URL.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Approve plans without asking.")]
ThreadArg = Annotated[str, typer.Argument(help="Thread id of the run.")]
TaskArg = Annotated[str | None, typer.Argument(help="What to do, in your words.")]
DataOption = Annotated[
    list[Path] | None, typer.Option("--data", help="Data file to copy into the workspace.")
]
PlanOption = Annotated[
    Path | None, typer.Option("--plan", help="Run this plan file; no planner call.")
]
ThreadOption = Annotated[str | None, typer.Option("--thread-id", help="Id of the new run.")]
WorkspaceOption = Annotated[
    str | None,
    typer.Option("--workspace", help="Folder the tools may use (default ./planexec-runs/THREAD)."),
]
Model = Annotated[str | None, typer.Option(help="e.g. openai:gpt-4.1")]


@app.command()
def run(
    task: TaskArg = None,
    data: DataOption = None,
    plan: PlanOption = None,
    yes: YesOption = False,
    thread_id: ThreadOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    workspace: WorkspaceOption = None,
    approval: Annotated[
        str | None, typer.Option(help="Approval policy: always, first or never.")
    ] = None,
    planner_model: Model = None,
    executor_model: Annotated[str | None, typer.Option(help="e.g. openai:gpt-4.1-mini")] = None,
    evaluator_model: Annotated[str | None, typer.Option(help="Model of the LLM judge.")] = None,
    judge: Annotated[bool, typer.Option("--judge", help="Let an LLM judge the results.")] = False,
    max_replans: Annotated[
        int | None, typer.Option(help="Most plan revisions after failures.")
    ] = None,
) -> None:
    """Plan TASK, show the plan for approval, then run it with live progress."""
    options: dict[str, Any] = {"llm_judge": judge, "max_replans": max_replans}
    options |= {"approval": approval, "planner_model": planner_model}
    options |= {"executor_model": executor_model, "evaluator_model": evaluator_model}
    tid = thread_id if thread_id is not None else str(uuid.uuid4())
    new = NewRun(task, plan, data or [], tid, workspace, _context(options))
    guard(actions.start(new, db or default_db(), Session(yes=yes, as_json=as_json)))


def _context(options: dict[str, Any]) -> Context:
    """Make the run's context from the options given (unset ones keep their defaults)."""
    given = {k: v for k, v in options.items() if v or (k == "max_replans" and v is not None)}
    try:
        return Context(**{"llm_judge": options["llm_judge"], **given})
    except InvalidContextError as exc:  # made before guard runs: same one line, exit 2
        error_line(str(exc))


@app.command()
def resume(
    thread_id: ThreadArg, yes: YesOption = False, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Continue a paused or interrupted run where it stopped."""
    guard(actions.resume(thread_id, db or default_db(), Session(yes=yes, as_json=as_json)))


@app.command()
def show(
    thread_id: ThreadArg,
    db: DbOption = None,
    as_json: JsonOption = False,
    output: Annotated[
        int | None, typer.Option("--output", help="Print this step's whole output as JSON.")
    ] = None,
) -> None:
    """Show a run: its plan, revisions, step statuses and timings, and token use."""
    guard(actions.show(thread_id, db or default_db(), Session(as_json=as_json), output))


@app.command()
def threads(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="How many runs to list.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List recent runs, newest first."""
    guard(actions.threads(db or default_db(), limit, Session(as_json=as_json)))


@app.command()
def demo(
    yes: YesOption = False,
    workspace: Annotated[
        str, typer.Option(help="Folder for the demo's data and output.")
    ] = "planexec-demo",
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
    new = NewRun(None, plan_path, [], str(uuid.uuid4()), str(target), context)
    guard(actions.start(new, db or default_db(), session))


def main() -> None:
    """Entry point of ``python -m planexec``."""
    app(prog_name="planexec")
