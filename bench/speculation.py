"""Review costs no time: the sales plan with a reviewer who reads it for 1.5 s, speculation off/on.

The workload of ``bench/planning_latency.py``: a local OpenAI-compatible server streams the
planner's compact sales plan (6 steps, the data tools on the shipped sales.csv, JSON without
spaces) at 300 ms + 10 ms per output token; the tools are the shipped data tools, run for real,
twice over: in one process whose imports and caches one run warmed up first (as a long-lived
server's are), and each run in a process of its own (as each ``planexec run`` is: the first
chart imports matplotlib, about 1.3 s of the tools' time). The run's
context asks for approval ``first`` and the runs API drives it (``Runs.astart(...,
decide=...)``, async): the reviewer (``decide``) is asked as soon as the approval request
arrives, reads it for 1.5 s while the stream goes on (with speculation on, the read-only steps
run meanwhile), and approves; the driver then resumes the thread with the answer.

Printed, in one run, for each declaration of the tools and speculation off and on (median of
``--repeat`` runs each, run side by side): time from the task to the request, from the
approval to the final answer, the whole task, the steps the approved plan adopted
(``speculation_adopted``) and the steps that still ran after the approval; then on / off.

Two declarations of the same tools: the shipped one (``clean_data``, ``generate_chart`` and
``write_report`` write files, so they count as side-effecting: only ``load_csv`` may run before
the approval, and every later step waits for ``clean_data``), and one whose operator also
declares ``clean_data`` and ``generate_chart`` free of side effects (they write only into the
run's own workspace; a rejected plan leaves those files there): only ``write_report`` and the
evaluation remain after the approval.
Run: python bench/speculation.py [--reviewer SECONDS] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import table
from langgraph.checkpoint.memory import InMemorySaver
from planning_latency import PACE, UNSPACED, WORKSPACE, answer, sales_workspace, workloads
from planning_latency import registry as planning_registry

from planexec import Context
from planexec.runs import Runs, new_run
from planexec.tools import ToolRegistry, default_registry
from tests.openai_server import serve

REVIEWER_SECONDS = 1.5
DECLARATIONS: dict[str, tuple[str, ...]] = {
    "shipped": (),
    "+ clean_data, generate_chart read-only": ("clean_data", "generate_chart"),
}
"""Each declaration of the tools: the tools an operator declares free of side effects (and
closed to the outside world: they write only into the run's workspace) besides the shipped
declarations."""


def registry(read_only: tuple[str, ...]) -> ToolRegistry:
    """The shipped tools, with ``read_only`` also declared free of side effects, closed world."""
    tools = default_registry()
    for name in read_only:
        tools.register(tools.get(name), side_effects=False, open_world=False, replace=True)
    return tools


@dataclass
class Timing:
    """One run: seconds from the task to the request, from the approval to the answer, and in
    all; the steps the approved plan adopted, and those that ran after the approval."""

    asked: float
    after_approval: float
    whole: float
    status: str
    adopted: list[int] = field(default_factory=list)
    ran_after: list[int] = field(default_factory=list)


async def reviewed_run(runs: Runs, task: str, speculate: bool, reviewer: float) -> Timing:
    """Run ``task`` to its end, the reviewer approving ``reviewer`` s after the request."""
    ctx = Context(
        planner_model="openai:bench-planner",
        executor_model="openai:bench-executor",
        shared_folder=WORKSPACE,
        approval="first",
        speculate=speculate,
    )
    marks: dict[str, float] = {}
    adopted: list[int] = []
    ran_after: list[int] = []

    def decide(request: Mapping[str, Any]) -> Mapping[str, Any]:
        marks.setdefault("asked", time.perf_counter())
        time.sleep(max(0.0, marks["asked"] + reviewer - time.perf_counter()))  # reads the plan
        marks.setdefault("approved", time.perf_counter())
        return {"action": "approve"}

    def on_event(event: Mapping[str, Any]) -> None:
        if event.get("event") == "speculation_adopted":
            adopted.extend(event["steps"])
        elif event.get("event") == "step_started" and "approved" in marks:
            ran_after.append(int(event["step"]))

    started = time.perf_counter()
    result = await runs.astart(
        new_run(task, context=ctx, tools=runs.tools), on_event=on_event, decide=decide
    )
    ended = time.perf_counter()
    return Timing(
        asked=marks["asked"] - started,
        after_approval=ended - marks["approved"],
        whole=ended - started,
        status=result.status,
        adopted=adopted,
        ran_after=ran_after,
    )


def median(timings: list[Timing], name: str) -> float:
    """The median of one measure over runs."""
    return statistics.median(float(getattr(t, name)) for t in timings)


def steps(ids: list[int]) -> str:
    """Step ids as a table cell."""
    return ", ".join(map(str, sorted(set(ids)))) or "-"


Timed = dict[tuple[str, bool], list[Timing]]
"""Runs by declaration of the tools and speculation off (False) or on (True)."""


async def warm(task: str, repeat: int, reviewer: float) -> Timed:
    """Every run in this process, after one run that warms imports and caches up."""
    timed: Timed = {}
    for name, read_only in DECLARATIONS.items():
        runs = Runs(InMemorySaver(), tools=registry(read_only), speculate="tools")
        await reviewed_run(runs, task, True, 0.0)  # imports, caches: not measured
        for _ in range(repeat):
            for speculate in (False, True):  # side by side: the machine's load hits both
                timing = await reviewed_run(runs, task, speculate, reviewer)
                timed.setdefault((name, speculate), []).append(timing)
    return timed


def cold(repeat: int, reviewer: float) -> Timed:
    """Each run in a process of its own, as each ``planexec run`` is (lazy imports counted)."""
    timed: Timed = {}
    for _ in range(repeat):
        for name in DECLARATIONS:
            for speculate in (False, True):
                child = [sys.executable, __file__, "--reviewer", str(reviewer), "--one", name]
                found = subprocess.run(
                    [*child, *(["--speculate"] if speculate else [])],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                timing = Timing(**json.loads(found.stdout.splitlines()[-1]))
                timed.setdefault((name, speculate), []).append(timing)
    return timed


async def one(task: str, name: str, speculate: bool, reviewer: float) -> None:
    """Run once, cold, and print the timing as JSON (``--one``: a child of :func:`cold`)."""
    runs = Runs(InMemorySaver(), tools=registry(DECLARATIONS[name]), speculate="tools")
    print(json.dumps(asdict(await reviewed_run(runs, task, speculate, reviewer))))


def rows_of(process: str, timed: Timed) -> tuple[list[list[Any]], list[list[Any]]]:
    """The table's rows (one per declaration and speculation) and the on / off ratios."""
    rows: list[list[Any]] = []
    ratios: list[list[Any]] = []
    for name in DECLARATIONS:
        for speculate in (False, True):
            timings = timed[(name, speculate)]
            rows.append(
                [
                    process,
                    name,
                    "on" if speculate else "off",
                    f"{median(timings, 'asked'):.2f} s",
                    f"{median(timings, 'after_approval'):.2f} s",
                    f"{median(timings, 'whole'):.2f} s",
                    steps(timings[-1].adopted),
                    steps(timings[-1].ran_after),
                    "/".join(sorted({t.status for t in timings})),
                ]
            )
        off, on = timed[(name, False)], timed[(name, True)]
        ratios.append(
            [
                process,
                name,
                f"{median(on, 'after_approval') / median(off, 'after_approval'):.2f}",
                f"{median(on, 'whole') / median(off, 'whole'):.2f}",
            ]
        )
    return rows, ratios


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reviewer", type=float, default=REVIEWER_SECONDS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", choices=list(DECLARATIONS), help=argparse.SUPPRESS)
    parser.add_argument("--speculate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sales_workspace()
    task, formats = workloads(planning_registry())["sales (6 steps)"]
    with serve(answer(formats["compact"], UNSPACED), PACE) as (url, _):
        os.environ.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="local-not-secret")
        if args.one is not None:
            await one(task, args.one, args.speculate, args.reviewer)
            return
        warmed = await warm(task, args.repeat, args.reviewer)
    rows, ratios = rows_of("one process, warm", warmed)
    more_rows, more_ratios = rows_of("a process per run", cold(args.repeat, args.reviewer))
    print(
        table(
            f"Sales plan, model at 300 ms + 10 ms per output token, reviewer reads for "
            f"{args.reviewer} s (median of {args.repeat}; steps: the last run)",
            [
                "runs",
                "tools declared",
                "speculation",
                "request",
                "approval -> answer",
                "whole task",
                "adopted",
                "ran after approval",
                "result",
            ],
            rows + more_rows,
        )
    )
    print(
        table(
            "Speculation on / off",
            ["runs", "tools declared", "approval -> answer", "whole"],
            ratios + more_ratios,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
