"""What ran before the approval (``--speculate``), as the plan view and the progress lines say.

A step that runs while its plan is reviewed is never shown as a step of the approved plan:
its lines say ``before approval (not approved yet)`` and use their own mark (``◇``); once the
plan is approved, the steps whose results it keeps say ``kept from review``.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from planexec.cli.ui import one_line, styled
from planexec.review.request import ApprovalRequest
from planexec.runs import StepEvent

MARK = "  ◇ step "
STYLE = "cyan"
NOT_YET = "before approval (not approved yet)"


def ids(steps: Iterable[object]) -> str:
    """Return step ids as ``1, 2, 4``."""
    return ", ".join(str(s) for s in steps)


def plan_view_lines(request: ApprovalRequest) -> list[Text]:
    """Return what the plan view says of the steps that run while it is read (none: [])."""
    found = request.get("speculation")
    if not found or not found.get("steps"):
        return []
    lines = [
        styled(
            (f"runs now, read-only: {ids(found['steps'])}", STYLE),
            " (while you read; an approved step keeps its result only if you approve it unchanged)",
        )
    ]
    for sid, result in (found.get("results") or {}).items():
        if result.get("status") == "succeeded":
            said = f"ran {NOT_YET}: {one_line(result.get('summary', ''))}"
        else:
            said = f"{result.get('status')} {NOT_YET}: {one_line(result.get('error', ''))}"
        lines.append(styled((f"{MARK}{sid}", STYLE), f" {said}"))
    return lines


def event_line(event: StepEvent, elapsed: float | None) -> Text | None:
    """Return the line of a speculation event (None: one shown by no line)."""
    kind, sid = event.get("event"), event.get("step")
    took = f" in {elapsed:.2f}s" if elapsed is not None else ""
    if kind == "speculative_step_finished":
        summary = one_line(event.get("summary", ""))
        return styled((f"{MARK}{sid}", STYLE), f" ran {NOT_YET}{took}: {summary}")
    if kind == "speculative_step_failed":
        error = one_line(event.get("error"))
        return styled((f"{MARK}{sid}", STYLE), f" failed {NOT_YET}{took}: {error}")
    if kind == "speculative_step_skipped":
        reason = one_line(event.get("reason"))
        return styled((f"{MARK}{sid}", STYLE), f" not run before approval: {reason}")
    if kind == "speculation_adopted":
        kept, dropped = event.get("steps") or [], event.get("discarded") or []
        lines = []
        if kept:
            lines.append(
                styled(("  ✔ kept from review: ", "green"), f"step {ids(kept)} (ran before "
                       "your approval; approved unchanged)")
            )  # fmt: skip
        if dropped:
            lines.append(
                styled(("  ↷ not kept: ", "magenta"), f"step {ids(dropped)} (ran before "
                       "approval; changed or failed since: runs as approved)")
            )  # fmt: skip
        return Text("\n").join(lines) if lines else None
    if kind == "speculation_discarded":
        steps = ids(event.get("steps") or [])
        return styled(("  ↷ discarded: ", "magenta"), f"step {steps} (ran before approval; "
                      "the plan was not approved)")  # fmt: skip
    return None
