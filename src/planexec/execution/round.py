"""One execution round: what the step tasks of one executor run share, and how they find it.

A task's arguments are its trace inputs and appear in the ``debug`` and ``tasks`` streams, so a
step task takes only its step (small JSON); what the steps of a round share (tools, context,
secrets to scrub) reaches them through :func:`current_round`, set by the executor node with
:func:`running`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.runtime import get_runtime

from planexec.context import Context, context_of
from planexec.execution.scheduling import DependencyGate
from planexec.execution.slots import SlotPool, chain_ranks
from planexec.llm.models import ChatModels
from planexec.plan.doc import plan_of, topological_order
from planexec.plan.records import current_records, earlier_outcome, record_key
from planexec.redaction.secrets import secret_values
from planexec.spending.budget import Budget, run_budget, spending
from planexec.state import PlanDoc, State, StepDoc, StepRecord
from planexec.storage.outputs import OutputStore
from planexec.storage.store_guard import StoreGuard
from planexec.tools.registry import ToolRegistry
from planexec.tools.sandbox import Sandbox
from planexec.tools.workspace import Workspace


@dataclass
class ExecutionRound:
    """Everything the step tasks of one executor run share."""

    plan: PlanDoc
    tools: ToolRegistry
    context: Context
    workspace: Workspace
    outputs: OutputStore
    run_id: str
    gate: DependencyGate
    slots: SlotPool
    """At most ``max_parallel_steps`` attempts at once, the longest chain first."""
    secrets: list[str] = field(default_factory=secret_values)
    store: StoreGuard = field(default_factory=StoreGuard.disabled)
    chat_models: ChatModels = field(default_factory=ChatModels)
    budget: Budget | None = None
    """What the run may still spend: no step attempt or model call starts once it is spent."""
    skippable: frozenset[int] = frozenset()
    """Steps whose failure their dependents go on without (``on_failure: "skip"``)."""
    running_steps: set[asyncio.Task[Any]] = field(default_factory=set)
    """The step coroutines under way (each task's body), cancelled if the run is stopped."""

    stopped: bool = False
    """Whether the run was stopped: a step task that starts after it does not run."""

    speculative: bool = False
    halted: Callable[[], str | None] | None = None
    """Why no new step may start now, if one may not (the speculator's round: an answer to the
    approval is coming, :mod:`planexec.execution.answers`); steps under way go on."""
    """Whether the round runs steps before their plan is approved (the speculator's): its
    steps' events are named ``speculative_step_*`` (:mod:`planexec.execution.speculation`)."""

    def cancel_steps(self) -> None:
        """Stop every step under way: the run was stopped (Ctrl-C, a closed stream, a cancel).

        A step waiting for its dependencies or a slot never starts; a tool call under way is
        abandoned (:mod:`planexec.concurrency.offloop`). Each step's task then ends, so
        LangGraph, which waits for its tasks when a run stops, returns at once.
        """
        self.stopped = True
        for task in list(self.running_steps):
            with contextlib.suppress(RuntimeError):  # its loop has closed: it has ended
                task.get_loop().call_soon_threadsafe(task.cancel)


def open_round(
    state: State,
    config: RunnableConfig,
    *,
    tools: ToolRegistry,
    sandbox: Sandbox,
    asynchronous: bool,
    chat_models: ChatModels,
    only: Collection[int] | None = None,
    done: Mapping[str, StepRecord] | None = None,
) -> tuple[ExecutionRound, list[StepDoc]]:
    """Return the round that runs the pending steps of the plan in state, and those steps in order.

    ``only`` (the speculator's round): run only these pending steps; ``done``: records of
    pending steps that count as finished in this round (speculative results its steps read).
    Touches the disk (the run's workspace): async callers run it in a thread.
    """
    plan = plan_of(state)
    context = context_of(get_runtime(Context).context)
    current = {**current_records(plan, state.get("steps") or {}), **(done or {})}
    records = {s["id"]: current[record_key(s["id"])] for s in plan["steps"]}
    earlier = {sid: earlier_outcome(sid, rec) for sid, rec in records.items()}
    order = topological_order(plan["steps"])
    to_run = [
        s
        for s in order
        if records[s["id"]]["status"] == "pending" and (only is None or s["id"] in only)
    ]
    slots = SlotPool(context.max_parallel_steps, chain_ranks(to_run, tools))
    gate = DependencyGate(
        {sid: done for sid, done in earlier.items() if done is not None},
        to_run={s["id"]: s["depends_on"] for s in to_run},
        slots=slots,
    )
    round_ = ExecutionRound(
        plan=plan,
        tools=tools,
        context=context,
        workspace=sandbox.for_run(context, config),
        outputs=sandbox.output_store(),
        run_id=str(config.get("configurable", {}).get("thread_id", "run")),
        gate=gate,
        slots=slots,
        store=StoreGuard.of(config, asynchronous=asynchronous),
        chat_models=chat_models,
        budget=run_budget(state, context),
        skippable=frozenset(s["id"] for s in plan["steps"] if s.get("on_failure") == "skip"),
    )
    return round_, to_run


def event_writer() -> Callable[[Any], None] | None:
    """Return the run's ``custom`` stream writer (None outside a graph run)."""
    try:
        return get_stream_writer()
    except RuntimeError:
        return None


_ROUND: contextvars.ContextVar[ExecutionRound] = contextvars.ContextVar("planexec_round")


@contextlib.contextmanager
def running(round_: ExecutionRound) -> Iterator[None]:
    """Make ``round_`` the round of the step tasks called (and running) in this context."""
    token = _ROUND.set(round_)
    try:
        if round_.budget is None:
            yield
        else:
            with spending(round_.budget):  # the steps' model calls spend the round's budget
                yield
    finally:
        _ROUND.reset(token)


def current_round() -> ExecutionRound:
    """Return the round of the running step task (set by the executor node with ``running``)."""
    try:
        return _ROUND.get()
    except LookupError:
        raise RuntimeError("a step task runs only inside the executor node") from None
