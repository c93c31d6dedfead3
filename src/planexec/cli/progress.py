"""Live progress of a run: who is at work (with elapsed time), step lines, every plan that runs."""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.text import Text

from planexec.cli import early
from planexec.cli.activity import Activity
from planexec.cli.board import PlanBoard
from planexec.cli.screen import PromptLine
from planexec.cli.ui import one_line, styled
from planexec.plan.compact import expand
from planexec.runs import StepEvent

WORK = {
    "planner": ("planner: writing the plan", "planned"),
    "replanner": ("replanner: revising the plan", "revised the plan"),
    "evaluator": ("judge: checking the results", "judged the results"),
}
"""Nodes that call a model: their status label, and the word for a finished call."""


class Progress:
    """Turns a run's events into the screen: status line, one line per step event, plans."""

    def __init__(
        self,
        out: Console,
        activity: Activity,
        board: PlanBoard,
        *,
        judge: bool,
        screen: PromptLine | None = None,
    ) -> None:
        """Print on ``out``; ``judge``: the evaluator calls a model (``--judge``).

        ``screen``: where lines of steps that run while a plan is reviewed go (above the
        prompt that waits meanwhile).
        """
        self.out, self.activity, self.board = out, activity, board
        self.screen = screen or PromptLine(out)
        self.early_started: dict[object, float] = {}  # speculative steps under way: since when
        self.models = set(WORK) - (set() if judge else {"evaluator"})
        self.planning = False  # the planner (or replanner) is writing a plan (or revision)
        self.written: dict[int, str] = {}  # its first draft's steps by position: "tool {args}"
        self.streamed: dict[int, str] = {}  # those that started, by step id

    def __call__(self, event: StepEvent) -> None:
        """Show one event (unknown events show nothing)."""
        kind = event.get("event")
        if kind in {"node_started", "node_finished"}:
            failed = bool(event.get("failed"))
            self.node(str(event.get("node")), started=kind == "node_started", failed=failed)
        elif kind is not None and kind.startswith(("speculative_", "speculation_")):
            self.before_approval(event)
        elif kind == "plan_changed" and "plan" in event:
            self.board.made(event["plan"], str(event.get("by")))
        elif kind == "plan_step":
            by = "replanner" if event.get("by") == "replanner" else "planner"
            written = event.get("index", 0)  # 1 for the first step
            if event.get("draft") == 1:  # only a first draft's steps start as it is written
                self.written[written] = step_text(event.get("written"))
            self.activity.relabel(
                by, f"{WORK[by][0]} ({written} step{'' if written == 1 else 's'} so far)"
            )
        elif kind == "plan_step_started":  # which step id a written step runs as
            sid, index = event.get("step"), event.get("index", 0)
            if isinstance(sid, int) and index in self.written:
                self.streamed[sid] = self.written[index]
        elif kind == "step_started":
            sid = event.get("step")
            tool = str(event.get("tool") or "model")
            self.activity.begin(f"step {sid}", f"step {sid} ({tool})")
            if self.planning and isinstance(sid, int) and sid in self.streamed:
                # the plan (or revision) is not shown yet (approval never): what runs, as written
                what = f" running ({self.streamed[sid]}) as the plan is written"
                self.out.print(
                    styled((f"  ▶ step {sid}", "yellow"), what),
                    soft_wrap=False,
                    no_wrap=True,
                    overflow="ellipsis",
                )
            else:
                self.out.print(styled((f"  ▶ step {sid}", "yellow"), f" running ({tool})"))
        else:
            elapsed = self.activity.end(f"step {event.get('step')}") if "step" in event else None
            line = event_line(event, elapsed or 0.0)
            if line is not None and kind == "step_finished":  # a summary ends at the width
                self.out.print(line, soft_wrap=False, no_wrap=True, overflow="ellipsis")
            elif line is not None:
                self.out.print(line)

    def before_approval(self, event: StepEvent) -> None:
        """Show an event of a step run while its plan is reviewed, or what the approval kept.

        No status line: a prompt may be waiting meanwhile.
        """
        sid = event.get("step")
        if event.get("event") == "speculative_step_started":
            self.early_started[sid] = time.monotonic()
            return
        since = self.early_started.pop(sid, None) if "step" in event else None
        line = early.event_line(event, time.monotonic() - since if since is not None else None)
        if line is not None:
            self.screen.print(line, soft_wrap=False, no_wrap=True, overflow="ellipsis")

    def node(self, name: str, *, started: bool, failed: bool = False) -> None:
        """Show a model's work starting (status line) or ending (one line with its time).

        The tick is for work done: a node that ``failed`` (its model call raised) gets none.
        """
        if name == "executor" and started:
            self.board.before_run()
        if name in {"planner", "replanner"}:
            self.planning, self.written, self.streamed = started, {}, {}
        if name not in self.models:
            return
        label, done = WORK[name]
        if started:
            self.activity.begin(name, label)
            if not self.activity.animated:
                self.out.print(styled(("  … ", "yellow"), label))
            return
        took = self.activity.end(name)
        if took is not None and failed:
            self.out.print(styled(("  ✘ ", "red"), f"{label}: stopped after {took:.2f}s"))
        elif took is not None:
            self.out.print(styled(("  ✔ ", "green"), f"{done} in {took:.2f}s"))


def step_text(written: object) -> str:
    """Return a streamed step as one line, ``tool {args}`` (its tool and arguments as written)."""
    expanded, _ = expand({"steps": [written]}, 1)
    step = expanded["steps"][0] if isinstance(expanded, dict) else None
    if not isinstance(step, dict):
        return one_line(written)
    args = json.dumps(step.get("args"), ensure_ascii=False, default=str)
    return one_line(f"{step.get('tool') or 'model'} {args}")


def event_line(event: StepEvent, elapsed: float) -> Text | None:
    """Return the line of one step event (None for events shown otherwise or not at all)."""
    kind, sid = event.get("event"), event.get("step")
    if kind == "step_finished":
        summary = one_line(event.get("summary", ""))
        return styled((f"  ✔ step {sid}", "green"), f" done in {elapsed:.2f}s: {summary}")
    if kind == "step_failed":
        error = one_line(event.get("error"))
        return styled((f"  ✘ step {sid}", "red"), f" failed after {elapsed:.2f}s: {error}")
    if kind == "step_skipped":
        return styled((f"  ↷ step {sid}", "magenta"), f" skipped: {one_line(event.get('reason'))}")
    if kind == "step_retry":
        error = one_line(event.get("error"))
        return styled((f"  ↻ step {sid}", "yellow"), f" retrying after: {error}")
    if kind == "tool_call_refused":
        tool = one_line(event.get("tool"))
        refused = f" refused a call to {tool}: not a tool of this step"
        return styled((f"  ⊘ step {sid}", "red"), refused)
    return None
