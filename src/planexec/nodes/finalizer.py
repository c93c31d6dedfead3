"""Finalizer node: the run's answer from its results, or a clear partial result naming failures.

The answer says what came out, never the plan's goal or a step's title alone
(:func:`result_steps`): the output of every succeeded step that no succeeded step depends on
(the plan's last steps; in a run that failed part way, the last results it reached), and for
such a step that acts (a tool with side effects: it writes, sends, deletes) also the outputs
it acted on, those of the steps it depends on directly. Each is shown under its step's label
as :func:`shown_result` says: a text output as written (a text of several lines indented
beneath the label), a short value inline, a long or spilled one by its preview and where to
read it whole; the files a step wrote are named (a step replayed from a recording wrote none:
its files are marked not written, and are not the run's ``artifacts``). Results are set
apart by a blank line (a chat shows each as its own paragraph). The only result's text is the
whole answer, as written: an executor model's reply, a tool's text.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.memory import PlanMemory
from planexec.nodes.conversation import answer_message
from planexec.plan.records import current_records, record_key
from planexec.spending.budget import run_budget
from planexec.state import BudgetStop, FinalResult, FinalStatus, State, StepDoc
from planexec.storage.outputs import OutputFileError, OutputStore, output_of
from planexec.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def _artifacts(
    step: StepDoc, record: Mapping[str, Any], outputs: OutputStore, tools: ToolRegistry
) -> list[str]:
    """Files a step made: its tool's declared file fields, for tools with side effects.

    A spilled output that cannot be read back names none.
    """
    tool = step["tool"]
    if tool is None or tool not in tools or not tools.has_side_effects(tool):
        return []
    fields = tools.file_fields(tool)
    if not fields:
        return []
    try:
        output = output_of(record, outputs)
    except OutputFileError:
        return []
    if not isinstance(output, dict):
        return []
    made: list[str] = []
    for key in fields:
        value = output.get(key)
        for path in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(path, str) and path and path not in made:
                made.append(path)
    return made


REPLAYED = "[replayed from a recording: its tool did not run]"
"""Said of each result a replayed step gave (:mod:`planexec.recording`): what it did (a mail
sent, a row written) was not done by this run."""
NOT_WRITTEN = "(not written)"
"""Said after each file a replayed step names: the file is not the run's, so it is left out of
``artifacts`` and marked so in the answer."""

INLINE_VALUE_CHARS = 300
"""Longest value (as compact JSON) the answer shows whole; a longer one by its preview."""


def finalize(state: State, *, outputs: OutputStore, tools: ToolRegistry) -> dict[str, Any]:
    """Summarise the run (status, answer, files made, what failed) and answer in the chat."""
    thread = get_config().get("configurable", {}).get("thread_id")
    final = final_result(state, outputs, tools, thread=str(thread) if thread else None)
    stop = state.get("budget_stop")
    if stop and final["status"] != "succeeded":  # a spent budget ended it: say which
        final["budget"] = stop
    elif (over := _over_budget(state)) is not None:
        final["budget"] = over
    if final["status"] == "succeeded":
        remember_plan(state)
    return {"final": final, "messages": [answer_message(final)]}


def _over_budget(state: State) -> BudgetStop | None:
    """Return the budget the run went past, if any (spent more than its limit).

    Calls and steps already running when a budget is spent finish, e.g. the planner's reply
    while the first steps run as it streams: a run may end over a budget it never stopped on.
    """
    over = run_budget(state, context_of(get_runtime(Context).context)).stop()
    return over if over is not None and over["spent"] > over["limit"] else None


def result_steps(steps: list[StepDoc], succeeded: set[int], tools: ToolRegistry) -> list[StepDoc]:
    """Return the steps whose outputs answer the task, in plan order (see the module's docstring).

    Every succeeded step no succeeded step depends on; for one that acts (side effects), also
    the succeeded steps it depends on directly (what it wrote or sent came from them).
    """
    needed = {d for s in steps if s["id"] in succeeded for d in s["depends_on"]}
    sinks = [s for s in steps if s["id"] not in needed and s["id"] in succeeded]
    chosen = {s["id"] for s in sinks}
    chosen |= {d for s in sinks if _acts(s, tools) for d in s["depends_on"] if d in succeeded}
    return [s for s in steps if s["id"] in chosen]


def _acts(step: StepDoc, tools: ToolRegistry) -> bool:
    tool = step["tool"]
    return tool is not None and (tool not in tools or tools.has_side_effects(tool))


TEXT_INDENT = "  "
"""How a text of several lines is set beneath its step's label (fewer than four spaces: Markdown
would show four as code)."""


def shown_result(
    step: StepDoc,
    record: Mapping[str, Any],
    made: list[str],
    thread: str | None,
    *,
    alone: bool = False,
) -> str:
    """Return how the answer shows one result step, under its label.

    The files it wrote, named (a replayed step's each marked :data:`NOT_WRITTEN`); a text
    output as written (after the label if one line, indented beneath it if several; with no
    label when it is the ``alone`` result: then it is the answer); a short value inline
    (compact JSON); a longer one, or one spilled to a file, by its preview and where to read
    it whole.
    """
    about = " ".join(step["description"].split())
    label = f"Step {step['id']} ({about if len(about) <= 80 else about[:79] + '…'})"
    output, spilled = record.get("output"), record.get("output_file")
    if record.get("replayed"):  # served from a recording: its tool did not run
        if made:
            return f"{label} {REPLAYED}: {', '.join(f'{p} {NOT_WRITTEN}' for p in made)}"
        label, alone = f"{label} {REPLAYED}", False  # never shown as the plain answer
    if made:
        return f"{label} wrote {', '.join(made)}"
    if isinstance(output, str) and output.strip():
        if alone:
            return output
        text = output.strip("\n")
        if "\n" not in text:
            return f"{label}: {text}"
        return f"{label}:\n{textwrap.indent(text, TEXT_INDENT)}"
    if spilled is not None or output is not None:
        text = json.dumps(output, ensure_ascii=False, default=str) if spilled is None else ""
        if spilled is None and len(text) <= INLINE_VALUE_CHARS:
            return f"{label}: {text}"
        where = (
            f"planexec show {thread} --output {step['id']}"
            if thread
            else f"planexec.storage.outputs.output_of(steps['{step['id']}'], store)"
        )
        return f"{label}: {record.get('summary', '')} (the whole output: {where})"
    return f"{label}: done (no output)"


def final_result(
    state: State, outputs: OutputStore, tools: ToolRegistry, *, thread: str | None = None
) -> FinalResult:
    """Return the run's status, answer, files made, and what failed and why.

    ``thread``: the run's thread id, to say where a spilled result is read whole.
    """
    plan = state.get("plan")
    records = current_records(plan, state.get("steps") or {}) if plan else {}
    approval = state.get("approval") or {}
    failure = state.get("failure_answer") or {}
    if failure.get("action") == "cancel":
        return FinalResult(
            status="cancelled",
            answer=f"Cancelled by the reviewer at failed step {failure.get('step')}: "
            f"{failure.get('reason')}",
            artifacts=[],
            failed_steps=[],
        )
    if approval.get("action") == "cancel":
        reason = approval.get("reason") or "no reason given"
        final = FinalResult(
            status="cancelled",
            answer=f"Cancelled by the reviewer: {reason}",
            artifacts=[],
            failed_steps=[],
        )
        return final
    if plan is None:
        final = FinalResult(
            status="failed",
            answer=state.get("error") or "no plan was made",
            artifacts=[],
            failed_steps=[],
        )
        return final

    steps = plan["steps"]
    status_of = {
        s["id"]: records.get(record_key(s["id"]), {}).get("status", "pending") for s in steps
    }
    failed = [
        {
            "step": s["id"],
            "tool": s["tool"],
            "status": status_of[s["id"]],
            "error": records.get(record_key(s["id"]), {}).get("error"),
        }
        for s in steps
        if status_of[s["id"]] != "succeeded"
    ]
    artifacts = [  # the files this run wrote: a replayed step's were not (planexec.recording)
        a
        for s in steps
        if status_of[s["id"]] == "succeeded" and not records[record_key(s["id"])].get("replayed")
        for a in _artifacts(s, records[record_key(s["id"])], outputs, tools)
    ]
    succeeded = {sid for sid, status in status_of.items() if status == "succeeded"}
    results = result_steps(steps, succeeded, tools)
    blocks = []
    for result in results:
        record = records[record_key(result["id"])]
        made = _artifacts(result, record, outputs, tools)
        blocks.append(shown_result(result, record, made, thread, alone=len(results) == 1))
    status: FinalStatus
    if not failed:
        status = "succeeded"
    else:
        status = "partial" if any(v == "succeeded" for v in status_of.values()) else "failed"
        evaluation = state.get("evaluation")
        why = state.get("error") or (evaluation["reason"] if evaluation else "")
        lines = [f"Not done ({why}):" if why else "Not done:"]
        lines.extend(
            f"- step {f['step']} [{f['tool']}] {f['status']}: {f['error'] or ''}" for f in failed
        )
        blocks.append("\n".join(lines))
    return FinalResult(
        status=status, answer="\n\n".join(blocks), artifacts=artifacts, failed_steps=failed
    )


def remember_plan(state: State) -> None:
    """Keep the approved plan of a run that succeeded as a template (plan memory, if on)."""
    runtime = get_runtime(Context)
    ctx = context_of(runtime.context)
    plan, approved = state.get("plan"), state.get("approved")
    if not (ctx.plan_memory and runtime.store is not None and plan and approved):
        return
    thread = str(get_config().get("configurable", {}).get("thread_id", ""))
    try:
        PlanMemory(runtime.store).remember(state["task"], dict(plan), thread)
    except Exception:  # memory never fails a run
        log.warning("could not keep the plan in plan memory", exc_info=True)
