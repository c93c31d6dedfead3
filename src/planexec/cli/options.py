"""The commands' options: names, help, and the choices and ranges typer checks before running."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DbOption = Annotated[
    str | None,
    typer.Option("--db", metavar="PATH|URL",
                 help="SQLite file or postgresql:// URL (default: $PLANEXEC_DB, else "
                 "~/.local/share/planexec/runs.sqlite)."),
]  # fmt: skip
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Approve every plan without asking (it is still shown).")
]
ThreadArg = Annotated[str, typer.Argument(help="Thread id of the run.", metavar="THREAD_ID")]
TaskArg = Annotated[str | None, typer.Argument(help="What to do, in your words.", metavar="TASK")]
DataOption = Annotated[
    list[Path] | None,
    typer.Option("--data", metavar="FILE",
                 help="Copy FILE into the workspace; repeat --data for each file."),
]  # fmt: skip
PlanOption = Annotated[
    Path | None, typer.Option("--plan", metavar="FILE", help="Run this plan file; no planner call.")
]
ThreadOption = Annotated[
    str | None,
    typer.Option("--thread-id", metavar="ID", help="Id of the new run (default: a new UUID)."),
]
WorkspaceOption = Annotated[
    str | None,
    typer.Option("--workspace", metavar="DIR",
                 help="The one folder the tools may use (default: the thread's own folder, "
                 "ROOT/threads/THREAD_ID; ROOT: $PLANEXEC_WORKSPACE_ROOT, else "
                 "./planexec-workspaces)."),
]  # fmt: skip
McpOption = Annotated[
    Path | None,
    typer.Option("--mcp", metavar="FILE", envvar="PLANEXEC_MCP_CONFIG", show_envvar=False,
                 help="Also plan with the tools of the MCP servers in FILE (the usual "
                 "mcpServers JSON; default: $PLANEXEC_MCP_CONFIG)."),
]  # fmt: skip
ToolsOption = Annotated[
    list[str] | None,
    typer.Option("--tools", metavar="MODULE:ATTR",
                 help="Also plan with your Python tools: ATTR of MODULE (a module importable "
                 "from here, or a .py file) is a ToolRegistry, a list of tools or plain "
                 "functions, or a function of no arguments returning one; repeatable."),
]  # fmt: skip
# choices and ranges are the run context's to check (planexec.context): one place, one message
ApprovalOption = Annotated[
    str | None,
    typer.Option(
        metavar="always|first|never",
        help="Which plans need your approval: always, first (the first plan, and revisions "
        "that add a side-effecting tool) or never (default: $PLANEXEC_APPROVAL, else first).",
    ),
]
Model = Annotated[str | None, typer.Option(metavar="PROVIDER:MODEL", help="e.g. openai:gpt-4.1")]
ExecutorModel = Annotated[
    str | None, typer.Option(metavar="PROVIDER:MODEL", help="e.g. openai:gpt-4.1-mini")
]
JudgeModel = Annotated[
    str | None, typer.Option(metavar="PROVIDER:MODEL", help="Model of the LLM judge.")
]
JudgeOption = Annotated[bool, typer.Option("--judge", help="Let an LLM judge the results.")]
ReplansOption = Annotated[
    int | None,
    typer.Option(metavar="0-30", help="Most plan revisions after failures (default 2)."),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--step-timeout",
        metavar="SECONDS",
        help="Seconds one attempt of a step may take (default 120).",
    ),
]
ParallelOption = Annotated[
    int | None,
    typer.Option(
        "--max-parallel", metavar="N", help="Most steps running at the same time (default 8)."
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        help="Token budget of the run: once spent, no new model call or step starts.",
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        help="Cost budget of the run (models priced by planexec's table of common models).",
    ),
]
MaxSecondsOption = Annotated[
    float | None,
    typer.Option(
        "--max-seconds",
        metavar="SECONDS",
        help="Working-time budget of the run (time at the approval prompt does not count).",
    ),
]
NoMemoryOption = Annotated[
    bool,
    typer.Option(
        "--no-memory",
        help="Plan without plan memory and keep no template of this run "
        "(default: $PLANEXEC_PLAN_MEMORY, else on).",
    ),
]
LimitOption = Annotated[int, typer.Option(min=1, metavar="N", help="How many runs to list.")]
OutputOption = Annotated[
    int | None,
    typer.Option("--output", metavar="STEP", help="Print this step's whole output as JSON."),
]
DemoWorkspace = Annotated[
    str | None,
    typer.Option(metavar="DIR", help="Folder for the demo's data and output (default: the "
                 "thread's own folder, ROOT/threads/THREAD_ID, as for `run`)."),
]  # fmt: skip
VersionOption = Annotated[
    bool | None, typer.Option("--version", is_eager=True, help="Print the version and exit.")
]
RecordOption = Annotated[
    Path | None,
    typer.Option("--record", metavar="DIR",
                 help="Record every tool call's output (and model reply) into DIR, as JSON files "
                 "to commit (secrets scrubbed); replay them with --replay DIR."),
]  # fmt: skip
ReplayOption = Annotated[
    Path | None,
    typer.Option("--replay", metavar="DIR",
                 help="Serve the tool outputs recorded in DIR instead of calling the tools (and "
                 "the model replies recorded there, else the model is asked); a call not "
                 "recorded fails its step, naming what changed. A replayed tool writes no file."),
]  # fmt: skip
ResumeRecordOption = Annotated[
    Path | None,
    typer.Option("--record", metavar="DIR",
                 help="Record the resumed run's calls into DIR: recording goes on only if "
                 "--record is given again."),
]  # fmt: skip
ResumeReplayOption = Annotated[
    Path | None,
    typer.Option("--replay", metavar="DIR",
                 help="Replay the resumed run's calls from DIR: replaying goes on only if "
                 "--replay is given again."),
]  # fmt: skip
SpeculateOption = Annotated[
    str | None,
    typer.Option("--speculate", metavar="tools|models", envvar="PLANEXEC_SPECULATE",
                 show_envvar=False,
                 help="While you review a plan, run its read-only steps (tools declared free of "
                 "side effects; models: also model-run steps whose tools are, paying for the "
                 "model before your approval); an approved, unchanged step keeps its result. "
                 "Not with --yes (default: $PLANEXEC_SPECULATE, else off)."),
]  # fmt: skip
ResumeSpeculateOption = Annotated[
    str | None,
    typer.Option("--speculate", metavar="tools|models", envvar="PLANEXEC_SPECULATE",
                 show_envvar=False,
                 help="Allow a run started with --speculate to run read-only steps again while "
                 "you review its plan: only if given again (default: $PLANEXEC_SPECULATE, "
                 "else off)."),
]  # fmt: skip
