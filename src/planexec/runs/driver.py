"""``Runs``: start, resume, read and list planexec runs kept by one LangGraph checkpointer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from planexec.admission import PlanexecGraph
from planexec.context import ApprovalPolicy, Context
from planexec.execution.speculation import SpeculationMode
from planexec.graph import build_graph
from planexec.recording import Recording
from planexec.runs.db import RunError, aopen_saver, aopen_store, open_saver, open_store, redact
from planexec.runs.reading import (
    LISTED,
    asaved_settings,
    has_settings,
    newest_threads,
    saved_settings,
    summary_of,
    thread_config,
    thread_of,
)
from planexec.runs.request import RunRequest, sandbox_for, saved_context
from planexec.runs.streaming import Stopped, adrive, drive, resume_payload
from planexec.runs.types import Caller, Decide, OnEvent, RunResult, ThreadState, ThreadSummary
from planexec.tools import ToolRegistry, ToolsLike
from planexec.tools.sandbox import Sandbox


class Runs:
    """Runs of the planexec graph in one checkpointer; ``x`` methods are sync, ``ax`` async.

    ``approval`` is the operator's policy; left unset, each run's context chooses (you are
    the operator of the runs you start here, as with the ``planexec`` command).
    ``caller`` says who answers the approvals of the runs started or resumed here (the
    ``planexec`` command: the local OS user, source ``cli``); unset, an answer's ``"by"``
    names who gives it (source ``python``).

    Example::

        with Runs.open("runs.sqlite") as runs:
            request = new_run("Chart sales.csv by month", workspace="ws", data=["sales.csv"])
            result = runs.start(request)  # stops at the plan approval: no `decide` given
            result = runs.resume(result.thread_id, {"action": "approve"})
            print(result.status, result.values["final"]["answer"])
    """

    def __init__(
        self,
        checkpointer: BaseCheckpointSaver[Any],
        *,
        db: str | None = None,
        tools: ToolsLike | None = None,
        approval: ApprovalPolicy | None = None,
        store: BaseStore | None = None,
        models: Mapping[str, BaseChatModel] | None = None,
        caller: Caller | None = None,
        recording: Recording | None = None,
        speculate: bool | SpeculationMode | None = None,
    ) -> None:
        """Keep runs in ``checkpointer`` (``db`` names it in messages and guards workspaces).

        ``store`` keeps plan memory's templates (:mod:`planexec.memory`); none: no memory.
        ``models`` pins a role's chat model for every run (``build_graph(models=...)``).
        ``caller`` goes into the config of every run started or resumed here.
        ``recording`` records or replays the tool calls of every run here
        (``build_graph(recording=...)``). ``speculate`` is the operator's speculation mode
        (``build_graph(speculate=...)``; unset: ``$PLANEXEC_SPECULATE``): runs whose context
        asks for it (``Context.speculate``) run read-only steps while their plan is reviewed.
        """
        self.checkpointer, self.db, self.approval = checkpointer, db, approval
        self.speculate = speculate
        self.caller, self.recording = caller, recording
        self.tools = ToolRegistry.of(tools) if tools is not None else None
        self.store, self.models = store, models
        self._graphs: dict[tuple[Sandbox | None, str | None], PlanexecGraph] = {}

    @classmethod
    @contextmanager
    def open(
        cls,
        db: str,
        *,
        tools: ToolsLike | None = None,
        approval: ApprovalPolicy | None = None,
        caller: Caller | None = None,
        recording: Recording | None = None,
        speculate: bool | SpeculationMode | None = None,
    ) -> Iterator[Runs]:
        """Open ``db`` (SQLite path or ``postgresql://`` URL) for the sync methods.

        Its checkpoints keep the runs, its store plan memory's templates.
        """
        with open_saver(db) as saver, open_store(db) as store:
            yield cls(saver, db=db, tools=tools, approval=approval, store=store, caller=caller,
                      recording=recording, speculate=speculate)  # fmt: skip

    @classmethod
    @asynccontextmanager
    async def aopen(
        cls,
        db: str,
        *,
        tools: ToolsLike | None = None,
        approval: ApprovalPolicy | None = None,
        caller: Caller | None = None,
        recording: Recording | None = None,
        speculate: bool | SpeculationMode | None = None,
    ) -> AsyncIterator[Runs]:
        """Open ``db`` (SQLite path or ``postgresql://`` URL) for the async methods."""
        async with aopen_saver(db) as saver, aopen_store(db) as store:
            yield cls(saver, db=db, tools=tools, approval=approval, store=store, caller=caller,
                      recording=recording, speculate=speculate)  # fmt: skip

    def graph(
        self, sandbox: Sandbox | None = None, context: Context | None = None
    ) -> PlanexecGraph:
        """Return the graph runs use here: this checkpointer, tools and approval policy.

        Compiled once per folder and policy, not once per run.
        """
        approval = self.approval or (context.approval if context else None)
        key = (sandbox, approval)
        if key not in self._graphs:
            self._graphs[key] = build_graph(
                self.checkpointer,
                tools=self.tools,
                sandbox=sandbox,
                approval=approval,
                store=self.store,
                models=self.models,
                recording=self.recording,
                speculate=self.speculate,
            )
        return self._graphs[key]

    def seed(self, request: RunRequest) -> RunnableConfig:
        """Save a new run's plan (if it brings one) as the planner's; return the run's config."""
        graph, config = self._graph_for(request), request.config(self.caller)
        if graph.get_state(config).values:
            raise RunError(_exists(request.thread_id))
        if request.plan is not None:  # a given plan goes to approval like any plan
            graph.update_state(config, _seeded(request), as_node="planner")
        return config

    async def aseed(self, request: RunRequest) -> RunnableConfig:
        """Async :meth:`seed`."""
        graph, config = self._graph_for(request), request.config(self.caller)
        if (await graph.aget_state(config)).values:
            raise RunError(_exists(request.thread_id))
        if request.plan is not None:
            await graph.aupdate_state(config, _seeded(request), as_node="planner")
        return config

    def start(
        self, request: RunRequest, *, on_event: OnEvent | None = None, decide: Decide | None = None
    ) -> RunResult:
        """Start a run; it ends, or stops at an approval when no ``decide`` answers it.

        A refused answer comes back to ``decide`` with the reason in ``request["error"]``.
        """
        config, first = self.seed(request), _first(request)
        graph = self._graph_for(request)
        return _result(request, drive(graph, config, request.context, first, on_event, decide))

    async def astart(
        self, request: RunRequest, *, on_event: OnEvent | None = None, decide: Decide | None = None
    ) -> RunResult:
        """Async :meth:`start`."""
        config, first = await self.aseed(request), _first(request)
        graph = self._graph_for(request)
        stopped = await adrive(graph, config, request.context, first, on_event, decide)
        return _result(request, stopped)

    def resume(
        self,
        thread_id: str,
        answer: Mapping[str, Any] | None = None,
        *,
        on_event: OnEvent | None = None,
        decide: Decide | None = None,
    ) -> RunResult:
        """Continue a thread, answering its pending approval with ``answer`` if given."""
        run = self._resumed(thread_id, self.get(thread_id))
        graph, payload = self._graph_for(run), resume_payload(answer)
        return _result(
            run, drive(graph, run.config(self.caller), run.context, payload, on_event, decide)
        )

    async def aresume(
        self,
        thread_id: str,
        answer: Mapping[str, Any] | None = None,
        *,
        on_event: OnEvent | None = None,
        decide: Decide | None = None,
    ) -> RunResult:
        """Async :meth:`resume`."""
        run = self._resumed(thread_id, await self.aget(thread_id))
        graph, payload = self._graph_for(run), resume_payload(answer)
        stopped = await adrive(
            graph, run.config(self.caller), run.context, payload, on_event, decide
        )
        return _result(run, stopped)

    def get(self, thread_id: str) -> ThreadState | None:
        """Return a thread's latest state and its run's settings, or None if there is none.

        The settings are the newest a planexec run saved: a state edit (Studio, update_state)
        writes a checkpoint without them, and the run still resumes as it was started.
        """
        config = thread_config(thread_id)
        snapshot = self.graph().get_state(config)
        if has_settings(snapshot.metadata):
            return thread_of(thread_id, snapshot)
        return thread_of(thread_id, snapshot, saved_settings(self.checkpointer, config))

    async def aget(self, thread_id: str) -> ThreadState | None:
        """Async :meth:`get`."""
        config = thread_config(thread_id)
        snapshot = await self.graph().aget_state(config)
        if has_settings(snapshot.metadata):
            return thread_of(thread_id, snapshot)
        return thread_of(thread_id, snapshot, await asaved_settings(self.checkpointer, config))

    def threads(self, limit: int = 20) -> list[ThreadSummary]:
        """List the ``limit`` most recently updated threads, newest first."""
        listed = newest_threads(i.config for i in self.checkpointer.list(None, limit=LISTED))
        graph = self.graph()  # states are read once the listing cursor is closed
        return [summary_of(t, graph.get_state(thread_config(t))) for t in listed[:limit]]

    async def athreads(self, limit: int = 20) -> list[ThreadSummary]:
        """Async :meth:`threads`."""
        configs = [i.config async for i in self.checkpointer.alist(None, limit=LISTED)]
        graph = self.graph()
        listed = newest_threads(configs)[:limit]
        return [summary_of(t, await graph.aget_state(thread_config(t))) for t in listed]

    def _graph_for(self, request: RunRequest) -> PlanexecGraph:
        return self.graph(request.sandbox, request.context)

    def _resumed(self, thread_id: str, thread: ThreadState | None) -> RunRequest:
        """Rebuild a thread's run from its saved settings (its context and its folder)."""
        if thread is None:
            where = redact(self.db) if self.db else "this checkpointer"
            raise RunError(f"no run with thread id {thread_id} in {where}")
        folder = thread.workspace
        sandbox = sandbox_for(folder, self.db, thread.outputs) if folder else None
        return RunRequest(thread_id, "", saved_context(thread.saved_context), sandbox)


def _exists(thread_id: str) -> str:
    return f"thread {thread_id} already exists; use `planexec resume {thread_id}`"


def _first(request: RunRequest) -> dict[str, Any] | None:
    return None if request.plan is not None else {"task": request.task}


def _seeded(request: RunRequest) -> dict[str, Any]:
    return {"task": request.task, "plan": request.plan}


def _result(request: RunRequest, stopped: Stopped) -> RunResult:
    values, pending = stopped
    workspace = str(request.sandbox.root) if request.sandbox else None
    return RunResult(request.thread_id, workspace, values, pending)
