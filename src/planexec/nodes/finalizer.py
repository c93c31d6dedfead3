"""Finalizer node: the run's answer from its results, or a clear partial result naming failures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planexec.outputs import OutputFileError, OutputStore, output_of
from planexec.plan import current_records
from planexec.state import FinalResult, FinalStatus, State


def _artifacts(record: Mapping[str, Any], outputs: OutputStore) -> list[str]:
    """Files a step's output names (a spilled output that cannot be read back names none)."""
    try:
        output = output_of(record, outputs)
    except OutputFileError:
        return []
    if isinstance(output, dict):
        return [v for k, v in output.items() if k.endswith("path") and isinstance(v, str) and v]
    return []


def finalize(state: State, *, outputs: OutputStore) -> dict[str, Any]:
    """Summarise the run: status, answer, files made, and what failed and why."""
    plan = state.get("plan")
    records = current_records(plan, state.get("steps") or {}) if plan else {}
    approval = state.get("approval") or {}
    if approval.get("action") == "cancel":
        reason = approval.get("reason") or "no reason given"
        final = FinalResult(
            status="cancelled",
            answer=f"Cancelled by the reviewer: {reason}",
            artifacts=[],
            failed_steps=[],
        )
        return {"final": final}
    if plan is None:
        final = FinalResult(
            status="failed",
            answer=state.get("error") or "no plan was made",
            artifacts=[],
            failed_steps=[],
        )
        return {"final": final}

    steps = plan["steps"]
    status_of = {s["id"]: records.get(str(s["id"]), {}).get("status", "pending") for s in steps}
    failed = [
        {
            "step": s["id"],
            "tool": s["tool"],
            "status": status_of[s["id"]],
            "error": records.get(str(s["id"]), {}).get("error"),
        }
        for s in steps
        if status_of[s["id"]] != "succeeded"
    ]
    artifacts = [
        a
        for s in steps
        if status_of[s["id"]] == "succeeded"
        for a in _artifacts(records[str(s["id"])], outputs)
    ]
    needed = {d for s in steps for d in s["depends_on"]}
    sinks = [s for s in steps if s["id"] not in needed and status_of[s["id"]] == "succeeded"]
    lines = []
    for sink in sinks:
        output = records[str(sink["id"])].get("output")  # a spilled one: its summary below
        made = _artifacts(records[str(sink["id"])], outputs)
        if isinstance(output, str):
            lines.append(output)
        elif made:
            lines.append(f"Step {sink['id']} ({sink['description']}) wrote {', '.join(made)}")
        else:
            lines.append(
                f"Step {sink['id']} ({sink['description']}): "
                f"{records[str(sink['id'])].get('summary', '')}"
            )
    status: FinalStatus
    if not failed:
        status = "succeeded"
    else:
        status = "partial" if any(v == "succeeded" for v in status_of.values()) else "failed"
        evaluation = state.get("evaluation")
        why = state.get("error") or (evaluation["reason"] if evaluation else "")
        lines.append(f"Not done ({why}):" if why else "Not done:")
        lines.extend(
            f"- step {f['step']} [{f['tool']}] {f['status']}: {f['error'] or ''}" for f in failed
        )
    final = FinalResult(
        status=status, answer="\n".join(lines), artifacts=artifacts, failed_steps=failed
    )
    return {"final": final}
