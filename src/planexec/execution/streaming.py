"""Steps that start while the plan streams, when no one has to approve it (approval ``never``).

The planner node then runs the plan's first round itself, as the model writes the plan, and the
replanner node the first round of its revision, as the model writes it. A step starts as soon
as its line is complete if, on its own, it is valid (the same
:func:`planexec.plan.validate_plan` as the whole plan), calls a tool, and depends only on steps
already started or kept (a revision's succeeded steps, done before the round opened); nothing
else starts before the whole plan is valid (and, for a revision, accepted by the replanner's
rules), and then the rest of the plan joins the same round (each step as soon as its own
dependencies are done: no barrier between the steps that started early and the others). A
revision's step that repeats a failed step waits for the whole revision: a revision made only
of such steps ends the run, and must not have run them again.

Durable and replayable like the executor's rounds: every step is a durable step task, called
in a deterministic order (streamed steps as their lines complete, the rest in run order), and a
result replayed for a call counts only for the step it ran
(:func:`planexec.execution.outcomes.ran_digest`): a plan written anew after a crash may differ.
A draft found invalid (or a revision refused) after some of its steps started keeps their
outcomes, for the audit and, where the repaired plan has the same steps, as their records. A
planner or replanner run resumed after an earlier attempt finished steps finds them again
(:func:`started_before`); under a policy that asks a human it replays only those (``only``) and
starts nothing else before the approval.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.errors import GraphBubbleUp
from langgraph.func import task

from planexec.compat.langgraph import node_checkpoint, task_results
from planexec.context import ApprovalPolicy, Context
from planexec.drafting import Draft, Drafting, draft_plan
from planexec.drafting.revising import signature
from planexec.errors import broke_off
from planexec.execution.outcomes import ran_digest, round_usage
from planexec.execution.round import ExecutionRound, event_writer, open_round, running
from planexec.execution.slots import chain_ranks
from planexec.execution.tasks import StepFuture, all_ended, publisher, result_of, round_outcomes
from planexec.llm.models import ChatModels, internal_call
from planexec.llm.usage import UsageCounter
from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.doc import step_digest, topological_order
from planexec.plan.records import current_records, record_key, records_after, to_record
from planexec.redaction.secrets import redact
from planexec.review.policy import runs_unapproved
from planexec.spending.budget import Budget, BudgetExhausted, spending, stopped
from planexec.state import (
    PlanDoc,
    Revision,
    RoleUsage,
    State,
    StepDoc,
    StepOutcome,
    StepRecord,
    add_usage,
)
from planexec.storage.storable import storable_text
from planexec.storage.store_guard import CheckpointStoreError
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox

StepTask = Callable[[StepDoc, int], StepFuture]
"""How a step's durable task is called, given the step and its plan's version: the executor
node's :func:`~planexec.nodes.executor.step_task` (``run_step`` or ``arun_step``, the run
tagged with its step)."""


def _hold_place(step_id: int) -> None:
    """Durable task: hold the place of a step a replay does not start (its result: nothing).

    A task's id comes from the order of calls in the node: a replay that starts only the steps
    an earlier attempt finished calls this in place of each other step it started then, so
    every finished step's call finds its own saved result.
    """
    return None


async def _ahold_place(step_id: int) -> None:
    """Durable task: :func:`_hold_place` for async runs (the same task name)."""
    return None


_hold_place.__name__ = _ahold_place.__name__ = "hold_place"
hold_place = task(_hold_place)
ahold_place = task(_ahold_place)


class StreamingRound:
    """The first round of a plan that runs while it streams: steps join it as they come."""

    def __init__(
        self,
        round_: ExecutionRound,
        call: StepTask,
        tools: ToolRegistry,
        max_steps: int,
        only: frozenset[str] | None = None,
        *,
        asynchronous: bool = False,
        kept: dict[str, StepRecord] | None = None,
        failed: frozenset[str] = frozenset(),
        by: str = "planner",
    ) -> None:
        """Run the steps offered on ``round_`` (its plan grows with them) through ``call``.

        ``only`` (replay): start only these steps (by :func:`ran_digest`), the ones an earlier
        attempt finished, and nothing else: a resume under a policy that asks a human.
        ``kept`` (a revision): the records of the steps it keeps, already in ``round_``'s plan
        and done; the streamed steps' ids come after theirs. ``failed``: the
        :func:`~planexec.drafting.revising.signature` of steps that failed, which no step repeats
        before the whole plan is known. ``by``: the node that drafts (planner, replanner).
        """
        self.round, self.call, self.tools, self.max_steps = round_, call, tools, max_steps
        self.only = only
        self.kept_records = dict(kept or {})
        self.kept = frozenset(s["id"] for s in round_.plan["steps"])
        self.kept_tools = {s["id"]: s["tool"] for s in round_.plan["steps"]}
        self.failed, self.by = failed, by
        self.held: dict[int, StepDoc] = {}  # steps a replay does not start (see ``offer``)
        self.holds: list[StepFuture] = []
        self.hold = ahold_place if asynchronous else hold_place
        self.started: dict[int, StepDoc] = {}
        self.calls: list[tuple[StepDoc, StepFuture]] = []
        self.seen_ids: set[int] = set()
        self.with_ids: bool | None = None  # whether the plan writes its ids (full format)
        self.closed = False

    @classmethod
    def open(
        cls,
        state: State,
        config: RunnableConfig,
        *,
        call: StepTask,
        tools: ToolRegistry,
        sandbox: Sandbox,
        chat_models: ChatModels,
        asynchronous: bool,
        max_steps: int,
        version: int,
        budget: Budget,
        only: frozenset[str] | None = None,
        kept: list[StepDoc] | None = None,
        records: dict[str, StepRecord] | None = None,
        goal: str = "",
        failed: frozenset[str] = frozenset(),
        by: str = "planner",
    ) -> StreamingRound:
        """Open a round for the plan about to stream (touches the disk: the workspace).

        Its steps spend ``budget``, the one the drafting model's calls spend. A revision's
        round opens with the ``kept`` steps of ``goal``'s plan, done (their ``records``): its
        new steps may depend on them and read their results (``$N``).
        """
        kept_steps = list(kept or [])
        kept_records = {
            record_key(s["id"]): (records or {})[record_key(s["id"])] for s in kept_steps
        }
        base = PlanDoc(goal=goal, steps=kept_steps, version=version)
        round_, waiting = open_round(
            {**state, "plan": base, "steps": kept_records},
            config,
            tools=tools,
            sandbox=sandbox,
            asynchronous=asynchronous,
            chat_models=chat_models,
        )
        if waiting:  # a kept step that has not succeeded: nothing may wait on it here
            raise RuntimeError(f"kept steps {[s['id'] for s in waiting]} have not succeeded")
        round_.budget = budget
        return cls(
            round_,
            call,
            tools,
            max_steps,
            only,
            asynchronous=asynchronous,
            kept=kept_records,
            failed=failed,
            by=by,
        )

    def offer(self, written: list[tuple[int, dict[str, Any] | None]]) -> None:
        """Start the streamed steps that may start now (see the module), given in plan order.

        Steps that complete together (in one chunk, or a whole reply at once) start together:
        free slots go to the longest chain among them, as in the executor's rounds.
        """
        due: list[tuple[StepDoc, bool, int]] = []  # each step that starts, if it runs, where
        for position, written_step in written:
            step = self._check(position, written_step)
            if step is None:
                continue
            runs = self.only is None or ran_digest(step) in self.only
            # a later step of the chunk may depend on it
            (self.started if runs else self.held)[step["id"]] = step
            due.append((step, runs, position))
        ready = [step for step, runs, _ in due if runs]
        for step in ready:
            self.round.plan["steps"].append(step)
            if step.get("on_failure") == "skip":
                self.round.skippable = self.round.skippable | {step["id"]}
        if len(ready) > 1:  # ranked among themselves: later steps are not known yet
            self.round.slots.rank(chain_ranks(ready, self.tools))
        if ready:
            self.round.gate.add({s["id"]: s["depends_on"] for s in ready})
        for step, runs, position in due:  # in the stream's order: a replay makes the same calls
            if runs:
                self._call(step, position)
            else:  # a replay holds its place: the steps after it find their own results
                self.holds.append(self.hold(step["id"]))

    def _check(self, position: int, written: dict[str, Any] | None) -> StepDoc | None:
        """Return the ``position``-th streamed step if it may start now, else None."""
        if self.closed or written is None or position > self.max_steps:
            return None
        has_id = "id" in written
        if self.with_ids is None:
            self.with_ids = has_id
        if has_id != self.with_ids:  # some steps with ids, some without: an invalid plan
            self.closed = True
            return None
        after = max(self.kept, default=0)  # a revision's steps are numbered on after the kept
        earlier = (self.seen_ids if has_id else set(range(after + 1, after + position))) | self.kept
        known = {**self.kept_tools, **{i: s["tool"] for i, s in (self.started | self.held).items()}}
        try:
            parsed = validate_plan(  # references to steps whose tools are known are checked too
                {"goal": "(streaming)", "steps": [written]},
                self.tools,
                max_steps=1,
                kept={i: known.get(i) for i in earlier},
            )
        except PlanValidationError:  # it waits for the whole plan (which may yet be valid)
            if has_id and isinstance(written.get("id"), int):
                self.seen_ids.add(written["id"])
            return None
        step = to_doc(parsed, version=self.round.plan["version"])["steps"][0]
        if step["id"] in self.seen_ids | self.kept:  # a duplicate id: an invalid plan
            self.closed = True
            return None
        self.seen_ids.add(step["id"])
        started = self.started.keys() | self.held.keys() | self.kept
        if step["tool"] is None or any(d not in started for d in step["depends_on"]):
            return None  # a model step needs the goal; a step after one not started waits
        if self.failed and signature(step) in self.failed:
            return None  # it repeats a failed step: the whole revision decides
        return step

    def _call(self, step: StepDoc, position: int) -> None:
        """Call the step's durable task (its dependents may join the round before it ends).

        A ``plan_step_started`` event first says which written step (``index``: its position
        in the draft, as in ``plan_step`` events) starts, as which step id.
        """
        write = event_writer()
        if write is not None:
            event = {"event": "plan_step_started", "by": self.by, "index": position}
            write({**event, "step": step["id"]})
        future = self.call(step, self.round.plan["version"])
        future.add_done_callback(publisher(self.round.gate, step))
        self.calls.append((step, future))

    def join(self, plan: PlanDoc) -> bool:
        """Add the rest of the valid whole ``plan`` to the round; False if a started step differs.

        The started steps are the plan's own (same lines, same validation): a difference means
        the whole reply and its stream disagree, and nothing more is started.
        """
        self.closed = True
        steps = {s["id"]: s for s in plan["steps"]}
        if any(steps.get(sid) != step for sid, step in self.started.items()):
            return False
        if any(steps.get(s["id"]) != s for s in self.round.plan["steps"] if s["id"] in self.kept):
            return False  # a revision keeps its kept steps as they were
        self.round.plan = plan
        self.round.skippable = frozenset(
            s["id"] for s in plan["steps"] if s.get("on_failure") == "skip"
        )
        new = [s for s in plan["steps"] if s["id"] not in self.kept]
        if len(self.started) == len(new):
            return True  # every step started as it streamed
        rest = [s for s in topological_order(new) if s["id"] not in self.started]
        self.round.slots.rank(chain_ranks(new, self.tools))
        self.round.gate.add({s["id"]: s["depends_on"] for s in rest})
        written = {s["id"]: position for position, s in enumerate(new, 1)}
        for step in rest:  # in run order: the same order on replay
            self._call(step, written[step["id"]])
        return True

    def futures(self) -> list[StepFuture]:
        """Return the futures of every task called so far (steps, and places held)."""
        return [future for _, future in self.calls] + self.holds

    def outcomes(self) -> list[StepOutcome]:
        """Return the outcomes of the ended round (raises if the checkpoint store failed)."""
        return round_outcomes(self.round, [s for s, _ in self.calls], self.futures())

    def records(self) -> dict[str, StepRecord]:
        """Return the records of the started steps, for the content each of them ran."""
        records: dict[str, StepRecord] = {}
        for step, future in self.calls:
            result = result_of(future, step)
            digest = step_digest(step, self.round.plan["goal"])
            records[record_key(step["id"])] = to_record(result, digest, judged_retry=False)
        return records

    def draft_revision(self, reason: str) -> Revision:
        """Return the audit record of the steps that started from a draft no plan kept.

        Only those steps (not a revision's kept steps, recorded with the plan they are in).
        """
        return Revision(
            version=self.round.plan["version"],
            reason=reason,
            plan=PlanDoc(
                goal=self.round.plan["goal"],
                steps=[s for s, _ in self.calls],
                version=self.round.plan["version"],
            ),
            outcomes=self.records(),
        )

    def carried(self, plan: PlanDoc) -> dict[str, StepRecord]:
        """Return ``plan``'s step records, the started (and kept) steps' where they are its own."""
        return current_records(plan, {**self.kept_records, **self.records()})

    async def await_all(self) -> None:
        """Wait until every step task called so far has ended (stopped, if this is cancelled)."""
        await all_ended(self.futures(), self.round)

    def start_rest(self, plan: PlanDoc | None) -> bool:
        """Start the rest of the whole ``plan`` in this round; False if it must wait.

        ``plan`` is what the node makes of a valid first draft (a revision: merged with the
        kept steps), None for a repaired draft (the first one was invalid) or one the node
        refuses. That, a plan whose started steps differ from its whole text, or a replay
        (``only``) is not run here: the rest of its steps go through the approval and the
        executor as usual (or the run ends).
        """
        if plan is None or self.only is not None:
            self.closed = True
            return False
        return self.join(plan)

    def first_plan(self, draft: Draft) -> PlanDoc | None:
        """Return the plan of a valid first draft (the planner's), else None (see start_rest)."""
        if draft.plan is None or draft.attempts != 1:
            return None
        return to_doc(draft.plan, version=self.round.plan["version"])

    def update(self, planned: dict[str, Any], ran_all: bool) -> dict[str, Any]:
        """Return the planner's state update with what this round ran (every task has ended).

        ``planned`` is the update of the drafted plan (or of no plan). When the whole plan ran
        here, its records are the round's; otherwise the started steps count for the plan
        where they are its own steps, and those that are not are kept as a revision (audit).
        """
        if not self.calls:
            return planned
        plan: PlanDoc | None = planned.get("plan")
        if ran_all and plan is not None:
            outcomes = self.outcomes()  # raises if the checkpoint store failed meanwhile
            return {
                **planned,
                "steps": records_after(plan, planned["steps"], outcomes),
                "usage": add_usage(planned.get("usage") or {}, round_usage(outcomes)),
            }
        records = self.carried(plan) if plan is not None else {}
        counted = {k for k, r in records.items() if r.get("status") != "pending"}
        update = {**planned, "usage": add_usage(planned.get("usage") or {}, self.usage())}
        if plan is not None:
            update["steps"] = records
        if any(record_key(s["id"]) not in counted for s, _ in self.calls):
            what = "plan" if self.by == "planner" else "revision"
            revision = self.draft_revision(
                f"steps of the {self.by}'s first draft started while it streamed (approval "
                f"'never'); that draft was not the {what} that came of it"
                + ("" if plan is not None else f" (no valid {what} came of it)")
            )
            update["revisions"] = [*(planned.get("revisions") or []), revision]
        return update

    def usage(self) -> dict[str, RoleUsage]:
        """Return the LLM usage the started steps counted (every task has ended)."""
        return round_usage([result_of(f, s) for s, f in self.calls])


REDRAFTS = 2
"""New conversations after the planner's reply broke off (:func:`planexec.errors.broke_off`)
once steps had started: at most 2, so 3 drafts in all. Not a retry of a model request: the
model layer made those (at most ``MAX_TRIES`` a call); each re-draft is a new call, and what
the model layer gives up on is not transient, so it is not re-drafted."""

REDRAFT_WAIT = 1.0
"""Seconds before the first new draft; doubled before each next one."""

KEEP_RAISING = (BudgetExhausted, CheckpointStoreError, GraphBubbleUp)
"""Errors that leave the node even after steps started: each is recorded or resumed as such."""


def _after_failure(streaming: StreamingRound, failure: Exception) -> Draft:
    """Return the draft of a planner that failed after steps started: no plan, and why.

    The node then ends the run with that error and the started steps kept as a revision, and
    stays resumable: no exception leaves it (a retry of the node would run them again, and a
    resume under a stricter policy would not see them).
    """
    streaming.closed = True
    said = redact(f"{type(failure).__name__}: {failure}", streaming.round.secrets)
    return Draft(
        plan=None,
        errors=[storable_text(f"the {streaming.by} model failed after steps had started: {said}")],
        attempts=1,
    )


# Hand-rolled, not the planner's RetryPolicy: LangGraph gives a node's finished tasks back to
# it on a resume, not on a retry of the node, whose steps would then run a second time.
async def draft_and_run(
    streaming: StreamingRound,
    model: BaseChatModel,
    conversation: Drafting,
    again: Callable[[], Drafting],
    config: RunnableConfig,
    whole: Callable[[Draft], PlanDoc | None] | None = None,
) -> tuple[Draft, bool]:
    """Draft a plan whose steps start as it streams; return it and ``ran_all``.

    ``ran_all`` says whether the whole plan ran in this round: ``whole`` makes the plan the rest
    of whose steps join the round from the draft (None: it must wait; default: the planner's
    :meth:`StreamingRound.first_plan`). Every started step has ended when this returns or
    raises. Once a step has started, a failing model no longer raises (see
    :func:`_after_failure`); a reply cut off by a transient error is first asked for again
    here, in a new conversation from ``again`` (it reads the workspace: called in a worker
    thread; its steps then start in the executor).
    """
    with running(streaming.round):
        try:
            try:
                draft = await draft_plan(
                    model, conversation, config, by=streaming.by, on_step=streaming.offer
                )
                return draft, streaming.start_rest((whole or streaming.first_plan)(draft))
            except KEEP_RAISING:
                raise
            except Exception as exc:
                if not streaming.calls:
                    raise  # nothing ran: the node's RetryPolicy may try again
                failure = exc
            streaming.closed = True
            await streaming.await_all()
            for attempt in range(1, REDRAFTS + 1 if broke_off(failure) else 1):
                await asyncio.sleep(REDRAFT_WAIT * 2 ** (attempt - 1))
                try:
                    fresh = await asyncio.to_thread(again)
                    return await draft_plan(model, fresh, config, by=streaming.by), False
                except KEEP_RAISING:
                    raise
                except Exception as exc:
                    failure = exc
                    if not broke_off(exc):
                        break
            return _after_failure(streaming, failure), False
        except asyncio.CancelledError:  # the run was stopped: no step goes on
            streaming.round.cancel_steps()
            raise
        finally:
            await streaming.await_all()  # whatever happens, no step is left behind


def round_args(
    ctx: Context,
    budget: Budget,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: ChatModels,
    *,
    sync_run: bool,
) -> dict[str, Any]:
    """Return what every streaming round of a run shares (for :func:`opening_of`)."""
    return {
        "sync_run": sync_run,
        "max_steps": ctx.max_steps,
        "budget": budget,
        "tools": tools,
        "sandbox": sandbox,
        "chat_models": chat_models,
    }


def opening_of(
    policy: ApprovalPolicy,
    finished: frozenset[str],
    call: StepTask,
    *,
    version: int,
    sync_run: bool,
    max_steps: int,
    budget: Budget,
    tools: ToolRegistry,
    sandbox: Sandbox,
    chat_models: ChatModels,
    **revision: Any,
) -> dict[str, Any] | None:
    """Return what a streaming round of plan ``version`` opens with, if steps may start.

    They may when no one approves first (``policy``), or to find again the steps an earlier
    attempt ``finished`` as its plan streamed (then only those). ``call`` runs a step (the
    executor's task for sync or async runs: ``sync_run``); ``revision`` holds a revision's kept
    steps (:meth:`StreamingRound.open`).
    """
    if not runs_unapproved(policy) and not finished:
        return None
    return {
        "call": call,
        "asynchronous": not sync_run,
        "only": None if runs_unapproved(policy) else finished,
        "tools": tools,
        "sandbox": sandbox,
        "chat_models": chat_models,
        "max_steps": max_steps,
        "version": version,
        "budget": budget,
        **revision,
    }


@dataclass(frozen=True)
class DraftCall:
    """What a planning node drafts with (:func:`drafted_and_ran`).

    The model and conversation; ``again``, a new conversation should a reply break off after
    steps started; the model call's ``config``; the ``budget`` and usage ``counter`` it spends;
    ``update``, the node's state update of a draft; ``whole``, the plan the rest of whose steps
    may join the streaming round (default: a valid first draft); ``by``, the drafting role.
    """

    model: BaseChatModel
    conversation: Drafting
    again: Callable[[], Drafting]
    config: RunnableConfig
    budget: Budget
    counter: UsageCounter
    update: Callable[[Draft], dict[str, Any]]
    whole: Callable[[Draft], PlanDoc | None] | None = None
    by: str = "planner"


def draft_call(
    role: str,
    model: BaseChatModel,
    conversation: Drafting,
    budget: Budget,
    counter: UsageCounter,
    **node: Any,
) -> DraftCall:
    """Return what ``role`` (the planner, the replanner) drafts with.

    ``node`` holds the node's own parts: ``again``, ``update`` and, for a revision, ``whole``
    (:class:`DraftCall`); the model call is named after the role.
    """
    config = counter.config(internal_call(f"{role} model"))
    return DraftCall(
        model, conversation, config=config, budget=budget, counter=counter, by=role, **node
    )


async def drafted_and_ran(
    state: State,
    config: RunnableConfig,
    opening: dict[str, Any] | None,
    call: DraftCall,
) -> dict[str, Any]:
    """Draft a plan (or revision) and return the node's state update.

    The one body of the planner's and the replanner's nodes once the model and conversation
    are chosen (``call``, whose ``update`` makes the node's own update of the draft: the plan,
    or why there is none). With ``opening`` (the arguments of :meth:`StreamingRound.open`,
    given when no one approves first or an earlier attempt started steps), steps start as the
    plan streams and the update adds what the round ran (:meth:`StreamingRound.update`);
    without it the plan is only drafted. A spent budget ends the run, with the started steps
    recorded.
    """
    if opening is None:
        try:
            with spending(call.budget):
                call.budget.check()
                draft = await draft_plan(call.model, call.conversation, call.config, by=call.by)
        except BudgetExhausted as exc:
            return stopped(exc.stop, call.budget, call.counter)
        return {**call.update(draft), "busy_seconds": call.budget.elapsed()}
    streaming = await asyncio.to_thread(  # touches the disk (the workspace)
        partial(StreamingRound.open, **opening), state, config
    )
    try:
        call.budget.check()
        draft, ran_all = await draft_and_run(
            streaming, call.model, call.conversation, call.again, call.config, call.whole
        )
    except BudgetExhausted as exc:
        return streaming.update(stopped(exc.stop, call.budget, call.counter), ran_all=False)
    if streaming.calls:
        with contextlib.suppress(CheckpointStoreError):
            await streaming.round.store.check()  # did the store fail meanwhile?
    return {**streaming.update(call.update(draft), ran_all), "busy_seconds": call.budget.elapsed()}


def _step_results(found: CheckpointTuple | None) -> frozenset[str]:
    """Return the steps whose task results a checkpoint's pending writes hold (their digests)."""
    return frozenset(
        str(value["ran"])
        for value in task_results(found.pending_writes if found else None)
        if isinstance(value, dict) and "ran" in value
    )


async def started_before(config: RunnableConfig, *, sync_run: bool) -> frozenset[str]:
    """Return the steps an earlier attempt of this planner (or replanner) run finished.

    Only the first round of a plan (or revision) under ``never`` runs steps in these nodes, so
    a result of a step task saved at this superstep means the plan was streaming and running
    when that attempt ended (a crash, a stop): the node must find those steps again (replayed,
    recorded) rather than plan anew and run them twice, whatever policy the resume asks for.
    Each is named by :func:`~planexec.execution.outcomes.ran_digest`. Read from the
    checkpoint's pending writes (LangGraph keeps a task's result there until the node ends;
    ``tests/unit/test_started_before.py`` pins that); empty on a fresh run. A sync run's saver
    is asked through its sync API (in a worker thread), an async run's through its async one.
    """
    found = node_checkpoint(config)
    if found is None:
        return frozenset()
    saver, where = found
    if sync_run:
        return _step_results(await asyncio.to_thread(saver.get_tuple, where))
    return _step_results(await saver.aget_tuple(where))
