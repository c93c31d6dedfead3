"""Speculator node: run the plan's read-only steps while a human reviews it (opt-in).

It runs beside the approval node's asking run, in the same superstep: the approval interrupts
at once (an async stream shows the request at once), and this node runs the steps that
:func:`planexec.execution.speculation.speculation_keys` allows, as the executor would (the same
durable step task, slots and budget), tagged ``planexec:speculative``; their events are named
``speculative_step_*``. It writes their results to ``speculated`` (each under the key it ran
with), their spending to ``speculation_usage`` and its working time to ``busy_seconds`` (the
time budget counts it, as every node's). The executor adopts a result only for an
approved step with the same key (:func:`planexec.execution.speculation.adopt`). After a
rejection or a cancel of the plan this node runs once more and discards them all
(:func:`planexec.execution.speculation.discard`): results are written in the superstep the
answer is given in, so the approval node itself never sees them in state.

It stops when the run is stopped (a closed stream, Ctrl-C, a server's cancel), when the
request expires, and when the approval is answered: the answer's run runs this node again
only if it had not ended, and it then starts nothing new and takes back what had finished
(durable task results; a step is never run twice for the same key).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from planexec.compat.langgraph import holds_answer, node_checkpoint, task_results
from planexec.context import Context, context_of
from planexec.execution import (
    StepFuture,
    all_ended,
    event_writer,
    open_round,
    publisher,
    running,
)
from planexec.execution.answers import AnswerWatch
from planexec.execution.outcomes import ran_digest, round_usage
from planexec.execution.speculation import (
    SpeculationMode,
    discard,
    effective_mode,
    speculation_keys,
    where_of,
)
from planexec.execution.streaming import ahold_place, hold_place
from planexec.execution.tasks import result_of
from planexec.llm.models import ChatModels
from planexec.nodes.executor import step_task
from planexec.plan.doc import plan_digest, step_digest
from planexec.plan.records import record_key, to_record
from planexec.review.authority import ApprovalRules
from planexec.review.checks import plan_problems, step_limit
from planexec.review.identity import on_server
from planexec.state import SpeculatedStep, State, StepDoc, StepOutcome
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox


def steps_to_speculate(
    state: State,
    tools: ToolRegistry,
    mode: SpeculationMode,
    max_steps: int,
    have: dict[str, SpeculatedStep],
) -> tuple[dict[int, str], list[int]]:
    """Return the keys of the steps that may run early, and those not run yet (in run order).

    ``have``: the results already speculated here (same workspace and model). Nothing runs for
    a plan that is not the one shown (a state edit since), nor for an invalid one. A step
    already speculated under the same key is not run again; a step runs only if each
    dependency that is not finished runs too or has a result under its own key, which
    succeeded (never waiting for a result that will not come).
    """
    plan, shown = state.get("plan"), state.get("approval") or {}
    if mode == "off" or plan is None or shown.get("action") != "presented":
        return {}, []
    if shown.get("digest") != plan_digest(plan) or plan_problems(plan, tools, max_steps):
        return {}, []
    keys = speculation_keys(plan, state.get("steps") or {}, tools, mode)
    steps = {s["id"]: s for s in plan["steps"]}
    to_run: list[int] = []
    for sid, key in keys.items():  # in run order: a dependency comes before its dependents
        if _result(have, sid, key) is not None:
            continue
        speculative_deps = [d for d in steps[sid]["depends_on"] if d in keys]
        if all(d in to_run or _result(have, d, keys[d]) == "succeeded" for d in speculative_deps):
            to_run.append(sid)
    return keys, to_run


def _result(have: dict[str, SpeculatedStep], sid: int, key: str) -> str | None:
    """Return how the step's result under ``key`` ended (None: there is none)."""
    found = have.get(record_key(sid))
    if found is None or found.get("key") != key:
        return None
    return str(found["record"].get("status"))


async def speculate(
    state: State,
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: ChatModels,
    operator_mode: SpeculationMode,
    rules: ApprovalRules,
    sync_run: bool = False,
) -> dict[str, Any]:
    """Run the steps that may run before approval; return their results as ``speculated``.

    Routed along after a reject or a cancel of the plan, it discards them all instead. Run
    again in a run that does not ask to speculate (a resume without the first run's context,
    or a graph whose operator no longer allows it), it starts nothing, and takes back what an
    earlier attempt of it finished (so a reject still discards it, and its files).
    """
    if (state.get("approval") or {}).get("action") in ("reject", "cancel"):
        return discard(state.get("speculated"), sandbox.output_store())
    ctx = context_of(get_runtime(Context).context)
    wanted = effective_mode(operator_mode, ctx.speculate)
    finished, answered = await _earlier_attempt(config, sync_run=sync_run)
    taking_back = answered or wanted == "off"  # either way: no new step starts
    if taking_back and not finished:
        return {}
    # which steps it may have run: the operator's say (unknown now: the widest)
    mode = operator_mode if operator_mode != "off" else "models"
    where = await asyncio.to_thread(  # touches the disk
        lambda: where_of(sandbox.for_run(ctx, config).root, ctx.executor_model)
    )
    have = {
        sid: found
        for sid, found in (state.get("speculated") or {}).items()
        if found.get("where") == where
    }
    keys, ids = steps_to_speculate(state, tools, mode, step_limit(state, ctx), have)
    if not ids:
        return {}
    left = None if taking_back else _seconds_left(state, rules)
    if left is not None and left <= 0:
        return {}
    answered = taking_back
    done = {  # earlier results its steps read
        sid: found["record"]
        for sid, found in have.items()
        if int(sid) in keys and _result(have, int(sid), keys[int(sid)]) == "succeeded"
    }
    round_, to_run = await asyncio.to_thread(  # touches the disk
        partial(open_round, chat_models=chat_models),
        state,
        config,
        tools=tools,
        sandbox=sandbox,
        asynchronous=not sync_run,
        only=frozenset(ids),
        done=done,
    )
    round_.speculative = True
    watch = AnswerWatch(_thread_of(config), plan_digest(round_.plan), _asked_at(state))
    round_.halted = watch.coming  # an answer is coming: no new step starts (answers.py)
    write = event_writer()
    starting = [s["id"] for s in to_run if not answered or ran_digest(s) in finished]
    if write is not None and starting:
        write({"event": "speculation_started", "steps": starting, "answered": answered})
    call = step_task(sync_run, speculative=True)
    hold = hold_place if sync_run else ahold_place
    version = round_.plan["version"]
    calls: list[tuple[StepDoc, StepFuture]] = []
    with running(round_):
        for step in to_run:  # in run order: a rerun makes the same calls
            if answered and ran_digest(step) not in finished:
                hold(step["id"])  # answered: nothing new starts; later results keep their place
                continue
            future = call(step, version)
            future.add_done_callback(publisher(round_.gate, step))
            calls.append((step, future))
        futures = [f for _, f in calls]
        stopped = False
        try:
            async with asyncio.timeout(left), watch.watching(on_server(config)):
                await all_ended(futures, round_)
        except TimeoutError:  # the request expired: its steps were stopped
            stopped = True
            await all_ended(futures, round_)  # until each stopped step's task has ended
    outcomes = [_ended(step, fut) for step, fut in calls]
    # taken back, only what the earlier attempt finished of its own steps counts (a failed
    # outcome may say another step ran in this call's place)
    ending = ("succeeded",) if answered else ("succeeded", "failed")
    kept = [o for o in outcomes if o is not None and o["status"] in ending]
    if write is not None and starting:
        ended = {"event": "speculation_ended", "steps": [o["id"] for o in kept]}
        write({**ended, "stopped": stopped or answered or watch.stopped})
    # its working time counts for the run's time budget, as every node's does
    worked = {"busy_seconds": round_.budget.elapsed()} if round_.budget is not None else {}
    if not kept:
        return worked
    # where they ran, as it is now they have run: files a step wrote (a tool its operator
    # declared read-only although it writes into the workspace) are the workspace's state
    # they were made in; any change from now until the approval's run makes them stale
    now = await asyncio.to_thread(  # touches the disk
        lambda: where_of(sandbox.for_run(ctx, config).root, ctx.executor_model)
    )
    steps = {s["id"]: s for s in to_run}
    goal = round_.plan["goal"]
    speculated: dict[str, SpeculatedStep] = {
        sid: SpeculatedStep(**{**found, "where": now}) for sid, found in have.items()
    }
    for o in kept:
        speculated[record_key(o["id"])] = SpeculatedStep(
            key=keys[o["id"]],
            where=now,
            version=version,
            record=to_record(o, step_digest(steps[o["id"]], goal), judged_retry=False),
        )
    return {"speculated": speculated, "speculation_usage": round_usage(kept), **worked}


def _ended(step: StepDoc, future: StepFuture) -> StepOutcome | None:
    """Return a step task's outcome, or None if it did not end with one (stopped)."""
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    try:
        return result_of(future, step)
    except RuntimeError:  # another step's result: not this one's
        return None


def _seconds_left(state: State, rules: ApprovalRules) -> float | None:
    """Return the seconds left to speculate: until half the request's time has passed.

    None when the request never expires. Half: a sync caller gets the question only when the
    speculation ends, and must still have half its time to answer it.
    """
    asked = (state.get("approval") or {}).get("asked_at")
    if not asked or rules.expires_after is None:
        return None
    half = datetime.fromisoformat(asked) + timedelta(seconds=rules.expires_after / 2)
    return (half - datetime.now(UTC)).total_seconds()


async def _earlier_attempt(
    config: RunnableConfig, *, sync_run: bool
) -> tuple[frozenset[str], bool]:
    """Return what an earlier attempt of this node run finished, and whether it was answered.

    Answered: the approval beside it has an answer (a resume value waits in the checkpoint).

    Empty and False on a first run. Each finished step is named by its
    :func:`~planexec.execution.outcomes.ran_digest`.
    """
    found = node_checkpoint(config)
    if found is None:
        return frozenset(), False
    saver, where = found
    if sync_run:
        saved = await asyncio.to_thread(saver.get_tuple, where)
    else:
        saved = await saver.aget_tuple(where)
    writes = saved.pending_writes if saved is not None else None
    finished = frozenset(
        str(value["ran"])
        for value in task_results(writes)
        if isinstance(value, dict) and "ran" in value
    )
    return finished, holds_answer(writes)


def _thread_of(config: RunnableConfig) -> str | None:
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


def _asked_at(state: State) -> float:
    """Return when the question this speculation runs beside was asked (epoch seconds)."""
    asked = (state.get("approval") or {}).get("asked_at")
    return datetime.fromisoformat(asked).timestamp() if asked else 0.0
