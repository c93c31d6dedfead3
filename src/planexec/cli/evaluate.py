"""``planexec eval DATASET``: run a dataset's examples, score them, print a table or JSON.

Only typer loads at import (``planexec --help`` stays fast); the work imports what it needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from planexec.cli import options as o

if TYPE_CHECKING:
    from rich.console import Console

    from planexec.evaluation import EvalExample, EvalScore, ExampleResult, Totals, Verdict

DatasetArg = Annotated[
    str,
    typer.Argument(metavar="DATASET",
                   help="A JSONL file (one example a line), or the name of a LangSmith dataset "
                   "when LANGSMITH_API_KEY is set."),
]  # fmt: skip
MemoryOption = Annotated[
    bool,
    typer.Option("--memory", help="Let plan memory reuse the approved plans of earlier "
                 "examples (default: off, each example is planned afresh)."),
]  # fmt: skip
ConcurrencyOption = Annotated[
    int, typer.Option("--max-concurrency", metavar="N", min=1, help="Examples run at once.")
]
MinOption = Annotated[
    list[str] | None,
    typer.Option("--min", metavar="NAME=VALUE",
                 help="Fail (exit 1) below this: pass_rate (share of examples passing every "
                 "evaluator) or an evaluator's mean score, e.g. --min pass_rate=0.9 --min "
                 "trajectory=1. Repeatable. Default: --min pass_rate=1 unless --min/--max "
                 "is given."),
]  # fmt: skip
MaxOption = Annotated[
    list[str] | None,
    typer.Option("--max", metavar="NAME=VALUE",
                 help="Fail (exit 1) above this total over the examples: model_calls, tokens, "
                 "cost, wall_time, steps. Repeatable."),
]  # fmt: skip
UploadOption = Annotated[
    bool,
    typer.Option("--upload", help="Record the results as an experiment of the LangSmith "
                 "dataset DATASET (LANGSMITH_API_KEY); traces the runs. Default: nothing leaves "
                 "this machine and tracing is off."),
]  # fmt: skip
EvalWorkspace = Annotated[
    Path | None,
    typer.Option("--workspace", metavar="DIR",
                 help="Folder of the examples' workspaces, one each, kept (default: temporary "
                 "folders, removed at the end)."),
]  # fmt: skip
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", metavar="DIR",
                 help="Where a LangSmith dataset's data files are (paths relative to DIR, "
                 "inside it). Default: only planexec:demo/NAME files."),
]  # fmt: skip
JudgeEvalOption = Annotated[
    bool,
    typer.Option("--judge", help="Also let an LLM judge each answer against the example's "
                 "facts (--evaluator-model)."),
]  # fmt: skip


def eval_command(
    dataset: DatasetArg,
    record: o.RecordOption = None,
    replay: o.ReplayOption = None,
    mcp: o.McpOption = None,
    tools: o.ToolsOption = None,
    planner_model: o.Model = None,
    executor_model: o.ExecutorModel = None,
    evaluator_model: o.JudgeModel = None,
    judge: JudgeEvalOption = False,
    memory: MemoryOption = False,
    as_json: o.JsonOption = False,
    max_concurrency: ConcurrencyOption = 4,
    at_least: MinOption = None,
    at_most: MaxOption = None,
    upload: UploadOption = False,
    workspace: EvalWorkspace = None,
    data_dir: DataDirOption = None,
) -> None:
    """Run each example of DATASET with its plan approved by policy, and score the runs.

    Scores: plan_valid_first_time, trajectory, answer_facts, final_status, steps, model_calls,
    tokens, cost, wall_time (and judge with --judge). Exits 0 when every threshold is met,
    1 when one is missed, 2 on a usage error.
    """
    from planexec.cli.guard import guard
    from planexec.cli.listing import Session

    session = Session(as_json=as_json)
    options = {"planner_model": planner_model, "executor_model": executor_model}
    options |= {"evaluator_model": evaluator_model}
    request = EvalRequest(
        dataset, record, replay, mcp, tools or [], options, judge, memory, max_concurrency,
        at_least or [], at_most or [], upload, workspace, data_dir,
    )  # fmt: skip
    guard(evaluate(request, session.out, as_json))


class EvalRequest:
    """The ``eval`` command's arguments."""

    def __init__(
        self,
        dataset: str,
        record: Path | None,
        replay: Path | None,
        mcp: Path | None,
        tools: list[str],
        options: dict[str, Any],
        judge: bool,
        memory: bool,
        max_concurrency: int,
        at_least: list[str],
        at_most: list[str],
        upload: bool,
        workspace: Path | None,
        data_dir: Path | None = None,
    ) -> None:
        """Keep the arguments as given."""
        self.dataset, self.record, self.replay, self.mcp = dataset, record, replay, mcp
        self.tools, self.options, self.judge, self.memory = tools, options, judge, memory
        self.max_concurrency, self.at_least, self.at_most = max_concurrency, at_least, at_most
        self.upload, self.workspace, self.data_dir = upload, workspace, data_dir


async def evaluate(request: EvalRequest, out: Console, as_json: bool) -> int:
    """Run the evaluation the command asks for; print it; return the exit code."""
    from planexec.cli.guard import EXIT_FAILED, UserError
    from planexec.cli.tooling import run_tools
    from planexec.evaluation import (
        DEFAULT_EVALUATORS,
        EvalTarget,
        ThresholdError,
        evaluate_examples,
        llm_judge,
        parse_threshold,
        report_json,
        totals,
        verdicts,
    )

    if (
        request.workspace is not None
        and request.workspace.exists()
        and not request.workspace.is_dir()
    ):
        raise UserError(f"--workspace {request.workspace}: not a folder")
    examples = _examples(request)
    keys = [e.__name__ for e in DEFAULT_EVALUATORS] + ["judge"] * request.judge
    try:
        thresholds = [parse_threshold("min", t, keys) for t in request.at_least]
        thresholds += [parse_threshold("max", t, keys) for t in request.at_most]
    except ThresholdError as exc:
        raise UserError(str(exc)) from None
    if not thresholds:
        thresholds = [parse_threshold("min", "pass_rate=1", keys)]
    recording = _recording(request)
    _check_recordings(request, recording, examples)
    evaluators: list[Any] = list(DEFAULT_EVALUATORS)
    if request.judge:
        evaluators.append(llm_judge(request.options.get("evaluator_model")))
    with json_stdout(as_json), run_tools(request.tools, request.mcp) as registry:
        target = EvalTarget(
            tools=registry, options=request.options, memory=request.memory,
            recording=recording, upload=request.upload, workspace_root=request.workspace,
        )  # fmt: skip
        where = request.workspace or "temporary (removed at the end)"
        out.print(
            f"evaluating {len(examples)} example(s) of {request.dataset} · workspaces {where}",
            style="dim",
        )
        results = await evaluate_examples(
            examples, target, evaluators, max_concurrency=request.max_concurrency,
            upload=request.upload,
        )  # fmt: skip
    figures = totals(results)
    checked = verdicts(figures, thresholds)
    if as_json:
        report = report_json(results, figures, checked)
        if recording is not None:  # what was replayed, and what was not (live model calls)
            report["recording"] = {"mode": recording.mode, **recording.stats}
        sys.stdout.write(json.dumps(report, default=str, indent=1))
        sys.stdout.write("\n")
    else:
        print_report(out, results, figures, checked, [e.__name__ for e in evaluators])
    if recording is not None:
        out.print(recording.summary(), style="dim")
    return 0 if all(v["met"] for v in checked) else EXIT_FAILED


@contextlib.contextmanager
def json_stdout(as_json: bool) -> Iterator[None]:
    """With ``--json``, point stdout (fd 1 too) at stderr while the evaluation runs.

    Tools that print, write to ``sys.__stdout__`` or to fd 1, and the processes they start,
    then never reach the JSON document, written to the real stdout afterwards.
    """
    if not as_json:
        yield
        return
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no fd 1 or 2 to juggle: only Python's stdout is moved
        saved = -1
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved >= 0:
            with contextlib.suppress(Exception):
                if sys.__stdout__ is not None:
                    sys.__stdout__.flush()  # what was written meanwhile goes to stderr
            os.dup2(saved, 1)
            os.close(saved)


def _examples(request: EvalRequest) -> list[EvalExample]:
    from planexec.cli.guard import UserError
    from planexec.evaluation import DatasetError, langsmith_dataset, load_dataset

    path = Path(request.dataset)
    from_file = path.exists() or path.suffix in {".jsonl", ".json"} or os.sep in request.dataset
    try:
        if from_file:
            if request.data_dir is not None:
                raise UserError(
                    "--data-dir is for a LangSmith dataset: a JSONL dataset's files are "
                    "relative to its own folder"
                )
            if request.upload:
                raise UserError(
                    "--upload records an experiment of a LangSmith dataset: give the dataset's "
                    "name (push the JSONL examples to LangSmith first); a JSONL file is "
                    "evaluated here only"
                )
            return load_dataset(path)
        if not os.environ.get("LANGSMITH_API_KEY"):
            raise UserError(
                f"no dataset file {request.dataset}; a LangSmith dataset name needs "
                "LANGSMITH_API_KEY"
            )
        return langsmith_dataset(request.dataset, data_dir=request.data_dir)
    except DatasetError as exc:
        raise UserError(str(exc)) from None


def _check_recordings(request: EvalRequest, recording: Any, examples: list[EvalExample]) -> None:
    """Refuse, before anything runs, a recording that cannot serve the examples as asked.

    A replay must hold every example's recording; with plan memory, examples run one at a
    time (an example may reuse the plan of one run before it: the order must not change).
    """
    from planexec.cli.guard import UserError
    from planexec.evaluation.target import example_name
    from planexec.recording.recorder import part_name

    if recording is None:
        return
    if request.memory and request.max_concurrency > 1:
        raise UserError(
            "--memory with --record or --replay needs --max-concurrency 1: with plan memory an "
            "example may reuse the plan of one run before it, so the order must be the same"
        )
    if recording.replaying:
        missing = [
            e.id for e in examples
            if not (recording.folder / part_name(example_name(e.inputs_dict()))).is_dir()
        ]  # fmt: skip
        if missing:
            shown = ", ".join(missing[:5]) + (
                f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            )
            raise UserError(
                f"--replay {recording.folder}: no recording of example(s) {shown}: record them "
                "with --record (an example without an id is known by its task, context and data)"
            )


def _recording(request: EvalRequest) -> Any:
    """Return the recording ``--record``/``--replay`` ask for (``run``'s rules), or None."""
    from planexec.cli.actions import Recorded

    return Recorded(request.record, request.replay).open()


MARKS = {1: ("✔", "green"), 0: ("✘", "red"), None: ("·", "dim")}
COLUMNS = {
    "plan": ("plan_valid_first_time",),
    "tools": ("trajectory",),
    "facts": ("answer_facts",),
    "status": ("final_status",),
    "limits": ("steps", "model_calls", "tokens", "cost", "wall_time"),
    "judge": ("judge",),
}
"""The table's verdict columns and the evaluators each shows (limits: all five at once)."""


def _verdict(scores: dict[str, EvalScore], keys: tuple[str, ...]) -> int | None:
    """Return a column's verdict: 0 if any of its evaluators missed, 1 if one met, else None."""
    given = [scores[k]["score"] for k in keys if k in scores and scores[k]["score"] is not None]
    return None if not given else int(all(given))


def print_report(
    out: Console,
    results: list[ExampleResult],
    figures: Totals,
    checked: list[Verdict],
    keys: list[str],
) -> None:
    """Print the results table (a row an example, a column an evaluator), totals, thresholds.

    The five limits (steps, model calls, tokens, cost, time) share one column; every missed
    score is said below the table with its reason.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from planexec.cli.ui import styled
    from planexec.evaluation.report import percent

    columns = {name: ks for name, ks in COLUMNS.items() if any(k in keys for k in ks)}
    priced = figures["cost"] > 0  # a cost column only when some model has a price
    table = Table(
        title="evaluation",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("example", overflow="fold")
    table.add_column("result")
    for name in columns:
        table.add_column(name, justify="center")
    for name in ("calls", "tokens", "cost $", "s") if priced else ("calls", "tokens", "s"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in results:
        marks = [Text(*MARKS[_verdict(r.scores, ks)]) for ks in columns.values()]
        o = r.outputs
        cost = [f"{o['cost']:.4f}"] if priced else []
        table.add_row(
            Text(r.example.id), Text("pass", "green") if r.passed else Text("FAIL", "red"),
            *marks, str(o["model_calls"]), f"{o['tokens']:,}", *cost, f"{o['wall_seconds']:.1f}",
        )  # fmt: skip
    cost = [f"{figures['cost']:.4f}"] if priced else []
    table.add_row(
        Text("total", "bold"), Text(f"{figures['passed']}/{figures['examples']}", "bold"),
        *[Text("") for _ in columns], str(figures["model_calls"]), f"{figures['tokens']:,}",
        *cost, f"{figures['wall_time']:.1f}",
    )  # fmt: skip
    out.print(table)
    for r in results:
        for score in r.scores.values():
            if score["score"] == 0:
                said = (f"{r.example.id} ", "bold"), (f"{score['key']}: ", "red")
                out.print(styled(*said, score["comment"]))
    means = ", ".join(f"{k} {percent(v)}" for k, v in figures["means"].items())
    rate = figures["passed"] / figures["examples"] if figures["examples"] else 0.0
    out.print(f"pass rate {percent(rate)} ({figures['passed']} of "
              f"{figures['examples']}); mean scores: {means}")  # fmt: skip
    for verdict in checked:
        value = "none" if verdict["value"] is None else f"{verdict['value']:g}"
        mark = ("met", "green") if verdict["met"] else ("missed", "red")
        out.print(styled(mark, f": {verdict['threshold']} (got {value})"))
