"""Wiring of the planexec graph: planner → approval → executor → evaluator ⇄ replanner → finalizer.

Python callers use ``build_graph(checkpointer=..., tools=...)``. What ``langgraph.json`` serves
(compiled without a checkpointer, with the tools of the MCP servers ``$PLANEXEC_MCP_CONFIG``
names) is :data:`planexec.served.graph`: importing this module builds and starts nothing.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import partial
from typing import Any, Literal, cast, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from planexec.admission import PlanexecGraph, admit
from planexec.concurrency import background
from planexec.context import ApprovalPolicy, Context
from planexec.errors import ConfigurationError, broke_off
from planexec.execution.speculation import SpeculationMode, operator_mode
from planexec.llm.models import ChatModels
from planexec.nodes import approval as approval_node
from planexec.nodes import (
    evaluator,
    executor,
    failure_review,
    finalizer,
    intake,
    planner,
    replanner,
    routing,
    speculator,
    summary,
)
from planexec.recording import Recording, using
from planexec.review.authority import rules_from
from planexec.review.notify import ApprovalHook, notifier_from
from planexec.state import EmbeddedOutput, InputState, OutputState, State
from planexec.tools import ToolRegistry, ToolsLike, default_registry
from planexec.tools.sandbox import Sandbox, SandboxError

# Under sync ``invoke`` each step task holds a worker thread while its step waits and runs;
# LangGraph sizes that pool by ``max_concurrency`` (else min(32, cpus + 4)), which would cap how
# many steps run at once. Threads are made only as tasks need them. Callers' values win.
RUN_DEFAULTS: RunnableConfig = {"max_concurrency": 1024, "recursion_limit": 200}

POLICIES: tuple[str, ...] = get_args(ApprovalPolicy)

MODEL_RETRY = RetryPolicy(max_attempts=3, initial_interval=1.0, retry_on=broke_off)
"""The planner's and replanner's new conversation after a reply broke off, twice at most.

Not a retry of a model request: the model layer (:mod:`planexec.llm.calls`) is the one layer
that asks a failed request again, and what it gives up on is never transient. A reply that broke
off after part of it was shown (:func:`planexec.errors.broke_off`) cannot be asked again there:
its preview has seen part of a plan, so the node drafts anew (once steps have started, the
streaming round does, :data:`planexec.execution.streaming.REDRAFTS`). The evaluator's judge is
never streamed, so it has no such layer."""


def one_node(
    node: Callable[..., Coroutine[Any, Any, Any]],
    recording: Recording | None = None,
    **bound: Any,
) -> RunnableLambda[Any, Any]:
    """Make a graph node of a coroutine function, written once, for sync and async runs alike.

    An async run (``ainvoke``, the LangGraph server) awaits it on its own loop. A sync run
    (``invoke``, ``stream``) hands it to planexec's background loop and waits on LangGraph's
    worker thread (:func:`planexec.concurrency.background.run_blocking`: LangGraph's config, stream
    writer and runtime go with it), telling it ``sync_run=True`` if it takes that argument (it
    then calls the sync step task and a sync saver's sync API). ``bound`` is given to every call.

    ``recording`` is in use (:func:`planexec.recording.using`) while the node runs: its step
    tasks and model calls, wherever they run, record to it or replay from it. None is set
    too: a graph without a recording never uses the recording of a graph that runs it.
    """
    takes = inspect.signature(node).parameters
    on_sync = {**bound, "sync_run": True} if "sync_run" in takes else bound

    async def arun(state: Any, config: RunnableConfig) -> Any:
        with using(recording):
            if "config" in takes:
                return await node(state, config, **bound)
            return await node(state, **bound)

    def run(state: Any, config: RunnableConfig) -> Any:
        with using(recording):  # run_blocking runs the node in a copy of this context
            if "config" in takes:
                return background.run_blocking(lambda: node(state, config, **on_sync))
            return background.run_blocking(lambda: node(state, **on_sync))

    return RunnableLambda(run, afunc=arun, name=node.__name__)


def _output_schema(output: str) -> type[OutputState]:
    """Return the output schema of ``build_graph(output=...)``: full, or a parent's narrow one."""
    if output == "embedded":
        return cast(type[OutputState], EmbeddedOutput)  # a run's result is a dict either way
    if output != "full":
        raise ConfigurationError(
            f"build_graph(output={output!r}): expected 'full' (a run's whole record, the "
            "default) or 'embedded' (only messages and planexec, for a parent graph)"
        )
    return OutputState


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | bool | None = None,
    *,
    tools: ToolsLike | None = None,
    store: BaseStore | None = None,
    name: str = "planexec",
    workspace: str | os.PathLike[str] | None = None,
    workspace_root: str | os.PathLike[str] | None = None,
    sandbox: Sandbox | None = None,
    approval: ApprovalPolicy | None = None,
    models: Mapping[str, BaseChatModel] | None = None,
    output: Literal["full", "embedded"] = "full",
    approvers: str | Iterable[str] | None = None,
    separate_approver: bool | None = None,
    approval_expires_after: float | None = None,
    approval_hook: ApprovalHook | None = None,
    recording: Recording | None = None,
    speculate: bool | SpeculationMode | None = None,
) -> PlanexecGraph:
    """Compile the planner-executor graph with the given checkpointer and tools.

    ``tools`` is a :class:`~planexec.tools.ToolRegistry` or any iterable of LangChain tools and
    plain functions, meaning exactly those tools (``[*default_registry(), my_tool]`` keeps the
    built-in ones); none: the built-in file and data tools. Anything else is a ``TypeError``.

    ``approval`` is the operator's approval policy (else ``$PLANEXEC_APPROVAL``, else
    ``first``): a run's context may ask for a stricter one (``always``), never a looser one.

    ``workspace`` is the one folder every run's tools may read and write (a path; its spilled
    outputs go to ``$PLANEXEC_OUTPUTS_DIR``, else the user's data folder). Without it, runs'
    files live under ``workspace_root`` (else ``$PLANEXEC_WORKSPACE_ROOT``, else
    ``./planexec-workspaces``): each thread in a folder of its own unless its context names a
    ``shared_folder`` (see :mod:`planexec.tools.sandbox`). ``sandbox`` instead gives the whole
    layout. Give at most one of the three.

    ``models`` pins model instances by role (``planner``, ``executor``, ``evaluator``) for every
    run of this graph; a role not given uses the run's context spec (``provider:model``).

    ``output="embedded"`` builds planexec for a parent graph (a node of it, or called from a
    node or a tool; see :mod:`planexec.embedding`): the run returns, and so writes to the
    parent, only ``messages`` and ``planexec`` (:class:`~planexec.state.EmbeddedOutput`).
    Compile it without a checkpointer (the default): it keeps its state in the parent's.

    Who may answer approvals and failed steps' questions, and until when
    (:mod:`planexec.review.authority`): ``approvers`` (else ``$PLANEXEC_APPROVERS``: identities
    or ``permission:NAME``, comma-separated), ``separate_approver`` (else
    ``$PLANEXEC_SEPARATE_APPROVER``: whoever started a run may not approve its plan if it has
    side effects), ``approval_expires_after`` (else ``$PLANEXEC_APPROVAL_EXPIRES_AFTER``,
    seconds). ``approval_hook`` (else ``$PLANEXEC_APPROVAL_HOOK``): a callable or URL told when
    a question waits, expires or is answered (:mod:`planexec.review.notify`).

    ``recording`` (a :class:`~planexec.recording.Recording`) records every tool call's output
    (and model reply) of this graph's runs to a folder, or replays them from it without
    calling the tools. It is the operator's choice, never a run's context: a client of the
    server cannot make it read or write a folder.

    ``speculate`` (else ``$PLANEXEC_SPECULATE``, else ``off``) allows runs that ask for it
    (``Context.speculate``) to run the plan's read-only steps while a human reviews it:
    ``tools`` (or True) steps whose tool is declared free of side effects, ``models`` also
    ``"tool": null`` steps (their model spends before the approval). An approved step keeps its
    result only if it and its inputs are unchanged (:mod:`planexec.execution.speculation`).
    """
    if recording is not None and not isinstance(recording, Recording):
        raise TypeError(
            f"build_graph(recording=...) takes a planexec.Recording, not {type(recording).__name__}"
        )
    speculation = operator_mode(speculate)
    rules = rules_from(approvers, separate_approver, approval_expires_after)
    notifier = notifier_from(approval_hook)
    box = _sandbox(workspace, workspace_root, sandbox)
    registry = ToolRegistry.of(tools) if tools is not None else default_registry()
    chat = ChatModels(models)
    builder = StateGraph(
        State,
        context_schema=Context,
        input_schema=InputState,
        output_schema=_output_schema(output),
    )
    builder.add_node("intake", intake.take_task)
    policy = approval or os.environ.get("PLANEXEC_APPROVAL") or "first"
    if policy not in POLICIES:
        raise ConfigurationError(
            f"approval policy {policy!r} (build_graph or PLANEXEC_APPROVAL) is not one of "
            f"{', '.join(POLICIES)}"
        )
    builder.add_node(
        "planner",
        one_node(
            planner.plan,
            recording,
            tools=registry,
            sandbox=box,
            chat_models=chat,
            operator_policy=cast(ApprovalPolicy, policy),
        ),
        retry_policy=MODEL_RETRY,
    )
    builder.add_node(
        "approval",
        partial(
            approval_node.review,
            tools=registry,
            operator_policy=cast(ApprovalPolicy, policy),
            rules=rules,
            notifier=notifier,
            speculation=speculation,
        ),
    )
    builder.add_node(
        "speculator",
        one_node(
            speculator.speculate,
            recording,
            tools=registry,
            sandbox=box,
            chat_models=chat,
            operator_mode=speculation,
            rules=rules,
        ),
    )
    builder.add_node(
        "executor",
        one_node(
            executor.execute,
            recording,
            tools=registry,
            sandbox=box,
            chat_models=chat,
        ),
    )
    builder.add_node(
        "evaluator",
        one_node(evaluator.evaluate, recording, sandbox=box, tools=registry, chat_models=chat),
    )
    builder.add_node(
        "replanner",
        one_node(
            replanner.replan,
            recording,
            tools=registry,
            sandbox=box,
            chat_models=chat,
            operator_policy=cast(ApprovalPolicy, policy),
        ),
        retry_policy=MODEL_RETRY,
    )
    builder.add_node(
        "failure_review",
        partial(failure_review.review_failure, tools=registry, rules=rules, notifier=notifier),
    )
    builder.add_node(
        "finalizer", partial(finalizer.finalize, outputs=box.output_store(), tools=registry)
    )

    builder.add_edge(START, "intake")
    builder.add_edge("intake", "planner")
    builder.add_conditional_edges("planner", routing.after_planner)
    builder.add_conditional_edges("approval", routing.after_approval, [*routing.AFTER_APPROVAL])
    builder.add_edge("speculator", END)  # its results wait in state for the executor
    builder.add_conditional_edges("executor", routing.after_executor)
    builder.add_conditional_edges("evaluator", routing.after_evaluator)
    builder.add_conditional_edges("replanner", routing.after_replanner)
    builder.add_conditional_edges("failure_review", routing.after_failure_review)
    if output == "embedded":
        builder.add_node("summary", summary.write_summary)
        builder.add_edge("finalizer", "summary")
        builder.set_finish_point("summary")
    else:
        builder.set_finish_point("finalizer")
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=name)
    return admit(compiled, box).with_config(RUN_DEFAULTS)


def _sandbox(
    workspace: str | os.PathLike[str] | None,
    root: str | os.PathLike[str] | None,
    sandbox: Sandbox | None,
) -> Sandbox:
    """Return the sandbox ``build_graph``'s folder arguments describe (at most one given)."""
    given = [n for n, v in (("workspace", workspace), ("workspace_root", root)) if v is not None]
    if sandbox is not None:
        given.append("sandbox")
    if len(given) > 1:
        choice = " or ".join(f"a {name}" for name in given)
        raise SandboxError(
            f"give build_graph {choice}, not {'both' if len(given) == 2 else 'all three'} "
            "(workspace: the one folder of every run; workspace_root: a folder per thread below "
            "it; sandbox: a layout of your own)"
        )
    if sandbox is not None:
        return sandbox
    return Sandbox.one_folder(workspace) if workspace is not None else Sandbox.at(root)
