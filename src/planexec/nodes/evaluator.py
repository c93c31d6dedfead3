"""Evaluator node: check results against what steps were meant to produce, then decide.

Cheap checks need no model: a succeeded step must have produced output, and files its
output names must exist. The optional LLM judge (``llm_judge``) costs one call per round,
for all newly finished steps together. Decisions: finish, retry, replan, give_up.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError

from planexec import models, prompts
from planexec.context import Context, context_of
from planexec.errors import WorkspaceError
from planexec.outputs import OutputFileError, output_of
from planexec.plan import current_records
from planexec.runner import summarize
from planexec.sandbox import Sandbox
from planexec.state import Evaluation, RoleUsage, State, StepRecord
from planexec.tools.workspace import Workspace


class Verdict(BaseModel):
    """The judge's view of one step's result."""

    step: int
    ok: bool
    reason: str = ""


class Verdicts(BaseModel):
    """The judge's verdicts on every step shown to it."""

    verdicts: list[Verdict] = Field(default_factory=list)


def cheap_problem(output: Any, workspace: Workspace) -> str | None:
    """Return why an output cannot be right without asking a model, or None."""
    if output is None or output == "" or output == {} or output == []:
        return "the step produced no output"
    if isinstance(output, dict):
        for key, value in output.items():
            if (key.endswith("path") or key == "dataset") and isinstance(value, str) and value:
                try:
                    found = workspace.resolve(value)
                except WorkspaceError as exc:
                    return f"its output names {value!r}: {exc}"
                if not found.exists():
                    return f"its output names {value!r}, which does not exist"
    return None


def _judge(
    state: State, outputs: dict[int, Any], ctx: Context
) -> tuple[dict[int, Verdict], dict[str, RoleUsage], str]:
    plan = state["plan"]
    assert plan is not None
    steps = {s["id"]: s for s in plan["steps"]}
    ids = list(outputs)
    shown = [
        {
            "step": i,
            "description": steps[i]["description"],
            "expected_output": steps[i]["expected_output"],
            "result": summarize(output, 2000),
        }
        for i, output in outputs.items()
    ]
    model = models.load_chat_model(ctx.evaluator_model).bind_tools(
        [Verdicts], tool_choice="Verdicts"
    )
    reply = model.invoke(
        [SystemMessage(prompts.JUDGE_SYSTEM), HumanMessage(json.dumps(shown, indent=1))]
    )
    usage = models.usage_of("evaluator", reply)
    for call in getattr(reply, "tool_calls", None) or []:
        try:
            parsed = Verdicts.model_validate(call["args"])
        except ValidationError:
            break
        return {v.step: v for v in parsed.verdicts if v.step in ids}, usage, ""
    return {}, usage, "the judge's reply was not understood; results accepted on cheap checks"


def evaluate(state: State, runtime: Runtime[Context], *, sandbox: Sandbox) -> dict[str, Any]:
    """Check the latest round's results and choose what happens next."""
    ctx = context_of(runtime.context)
    workspace = sandbox.for_run(ctx)
    store = sandbox.output_store()
    plan = state["plan"]
    assert plan is not None
    current = current_records(plan, state.get("steps") or {})  # only this plan's results count
    records: dict[str, StepRecord] = {k: StepRecord(**v) for k, v in current.items()}
    fresh = [
        int(sid)
        for sid, rec in records.items()
        if rec.get("status") == "succeeded" and not rec.get("checked")
    ]
    outputs: dict[int, Any] = {}
    for sid in fresh:
        rec = records[str(sid)]
        rec["checked"] = True
        try:
            outputs[sid] = output_of(rec, store)
        except OutputFileError as exc:
            problem: str | None = str(exc)
        else:
            problem = cheap_problem(outputs[sid], workspace)
        if problem:
            rec["status"], rec["error"] = "failed", f"check failed: {problem}"

    update: dict[str, Any] = {}
    note = ""
    retry: list[int] = []
    judged = [sid for sid in fresh if records[str(sid)]["status"] == "succeeded"]
    if ctx.llm_judge and judged:
        verdicts, usage, note = _judge(state, {sid: outputs[sid] for sid in judged}, ctx)
        update["usage"] = usage
        for sid, verdict in verdicts.items():
            rec = records[str(sid)]
            if not verdict.ok:
                first_time = not rec.get("judged_retry")
                rec["status"] = "failed"
                rec["error"] = f"judge: {verdict.reason or 'does not fit'}"
                if first_time:
                    retry.append(sid)

    failed = sorted(int(s) for s, r in records.items() if r.get("status") == "failed")
    skipped = sorted(int(s) for s, r in records.items() if r.get("status") == "skipped")
    unrun = sorted(int(s) for s, r in records.items() if r.get("status") == "pending")
    if unrun:  # only a state edit or fork leaves steps unrun: the executor's gate decides
        evaluation = Evaluation(
            decision="retry", reason=f"steps {unrun} of this plan have not run", retry=unrun
        )
    elif not failed and not skipped:
        evaluation = Evaluation(decision="finish", reason="every step succeeded", retry=[])
    elif retry and len(retry) == len(failed):
        for sid in retry:
            records[str(sid)] = StepRecord(status="pending", attempts=0, judged_retry=True)
        for sid in skipped:
            records[str(sid)] = StepRecord(status="pending", attempts=0)
        evaluation = Evaluation(
            decision="retry", reason=f"the judge rejected steps {retry}", retry=retry
        )
    elif state.get("replans", 0) < ctx.max_replans:
        evaluation = Evaluation(decision="replan", reason=f"steps {failed} failed", retry=[])
    else:
        evaluation = Evaluation(
            decision="give_up",
            reason=f"steps {failed} failed and the replan limit ({ctx.max_replans}) is reached",
            retry=[],
        )
    if note:
        evaluation["reason"] += f" ({note})"
    return {**update, "steps": records, "evaluation": evaluation}
