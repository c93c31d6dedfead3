"""The ``planexec`` command's typer app: its commands and options (the work is in actions).

Only typer and click load at import, so ``planexec --help`` answers at once; each command
imports what it needs when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from planexec.cli import options as o
from planexec.cli.evaluate import eval_command

app = typer.Typer(
    help="Turn a task into a plan you approve, then run it: in parallel, checked, replanned.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is shown as written
)


def _version(asked: bool | None) -> None:
    if asked:
        from planexec import __version__

        typer.echo(f"planexec {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _main(version: o.VersionOption = None) -> None:
    """Turn a task into a plan you approve, then run it: in parallel, checked, replanned."""
    _version(version)


@app.command()
def run(
    task: o.TaskArg = None,
    data: o.DataOption = None,
    plan: o.PlanOption = None,
    yes: o.YesOption = False,
    thread_id: o.ThreadOption = None,
    db: o.DbOption = None,
    as_json: o.JsonOption = False,
    workspace: o.WorkspaceOption = None,
    approval: o.ApprovalOption = None,
    planner_model: o.Model = None,
    executor_model: o.ExecutorModel = None,
    evaluator_model: o.JudgeModel = None,
    judge: o.JudgeOption = False,
    max_replans: o.ReplansOption = None,
    step_timeout: o.TimeoutOption = None,
    max_parallel: o.ParallelOption = None,
    max_tokens: o.MaxTokensOption = None,
    max_cost: o.MaxCostOption = None,
    max_seconds: o.MaxSecondsOption = None,
    no_memory: o.NoMemoryOption = False,
    mcp: o.McpOption = None,
    tools: o.ToolsOption = None,
    record: o.RecordOption = None,
    replay: o.ReplayOption = None,
    speculate: o.SpeculateOption = None,
) -> None:
    """Plan TASK, show the plan for approval, then run it with live progress.

    Runs keep their files in the thread's own folder below the workspace root
    ($PLANEXEC_WORKSPACE_ROOT, else ./planexec-workspaces: ROOT/threads/THREAD_ID) unless
    --workspace names a folder. --record DIR keeps every tool output (and model reply) as
    files; --replay DIR serves them without calling the tools. --speculate tools runs the
    plan's read-only steps while you review it.
    """
    from planexec.cli import actions
    from planexec.cli.guard import guard

    options: dict[str, Any] = {"approval": approval, "planner_model": planner_model}
    options |= {"executor_model": executor_model, "evaluator_model": evaluator_model}
    options |= {"max_replans": max_replans, "step_timeout": step_timeout}
    options |= {"max_parallel_steps": max_parallel, "llm_judge": judge}
    options |= {"max_tokens": max_tokens, "max_cost": max_cost, "max_seconds": max_seconds}
    options |= {"plan_memory": False if no_memory else None}
    recorded = actions.Recorded(record, replay)
    new = actions.NewRun(
        task, plan, data or [], thread_id, workspace, options, mcp, tools or [], recorded,
        speculate,
    )  # fmt: skip
    session = actions.Session(yes=yes, as_json=as_json)
    guard(actions.start(new, actions.database(db), session), session.running)


@app.command()
def resume(
    thread_id: o.ThreadArg,
    yes: o.YesOption = False,
    db: o.DbOption = None,
    as_json: o.JsonOption = False,
    mcp: o.McpOption = None,
    tools: o.ToolsOption = None,
    record: o.ResumeRecordOption = None,
    replay: o.ResumeReplayOption = None,
    speculate: o.ResumeSpeculateOption = None,
) -> None:
    """Continue a paused or interrupted run where it stopped (give it the same --mcp, --tools).

    A run started with --record or --replay records or replays only if given it again.
    """
    from planexec.cli import actions
    from planexec.cli.guard import guard

    session = actions.Session(yes=yes, as_json=as_json)
    recorded = actions.Recorded(record, replay)
    resumed = actions.resume(
        thread_id, actions.database(db), session, mcp, tools or [], recorded, speculate
    )
    guard(resumed, session.running)


@app.command()
def show(
    thread_id: o.ThreadArg,
    db: o.DbOption = None,
    as_json: o.JsonOption = False,
    output: o.OutputOption = None,
) -> None:
    """Show a run: its plan, revisions, steps and timings, who decided what, answer and files."""
    from planexec.cli import actions
    from planexec.cli.guard import guard

    guard(actions.show(thread_id, actions.database(db), actions.Session(as_json=as_json), output))


@app.command()
def threads(
    db: o.DbOption = None, limit: o.LimitOption = 20, as_json: o.JsonOption = False
) -> None:
    """List recent runs, newest first."""
    from planexec.cli import actions
    from planexec.cli.guard import guard

    guard(actions.threads(actions.database(db), limit, actions.Session(as_json=as_json)))


@app.command()
def plans(
    action: Annotated[
        str, typer.Argument(help="list, show KEY or delete KEY", metavar="[list|show|delete]")
    ] = "list",
    key: Annotated[str | None, typer.Argument(help="The template's key.", metavar="KEY")] = None,
    db: o.DbOption = None,
    as_json: o.JsonOption = False,
) -> None:
    """List, show or delete plan memory's templates (approved plans that ran well)."""
    from planexec.cli import actions
    from planexec.cli.guard import guard
    from planexec.cli.plans import plans as run_plans

    session = actions.Session(as_json=as_json)
    guard(run_plans(actions.database(db), action, key, session))


@app.command()
def demo(
    yes: o.YesOption = False,
    workspace: o.DemoWorkspace = None,
    db: o.DbOption = None,
    as_json: o.JsonOption = False,
) -> None:
    """Analyse a shipped sales CSV offline, from a recorded plan (no model, no API key)."""
    from planexec.cli import actions
    from planexec.cli.guard import guard

    session = actions.Session(yes=yes, as_json=as_json)
    target = Path(workspace) if workspace is not None else None
    guard(actions.demo(target, actions.database(db), session), session.running)


app.command("eval")(eval_command)  # planexec eval DATASET: cli/evaluate.py


def main() -> None:
    """Entry point of ``python -m planexec``."""
    app(prog_name="planexec")
