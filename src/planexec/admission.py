"""Admission: what a caller sends is checked before LangGraph stores any of it.

LangGraph writes a run's input, a ``Command``'s resume value and ``update_state`` values to
the checkpoint before any node sees them; a value the checkpoint cannot store (an integer
beyond 64 bits, a NUL on PostgreSQL, a value nested hundreds of levels deep) would fail that
write, or the thread's next one. :class:`PlanexecGraph` is the compiled graph with one gate
in front of every way in (``invoke``/``stream`` and their async forms, which the LangGraph
server also uses, and ``update_state`` in all its forms): a value that cannot be stored is
refused with :class:`InvalidInputError` before anything is written, so the thread is left
exactly as it was. So is a resume (``None``, or any ``Command``) of a thread that has nothing
to resume (:func:`check_resumable`): LangGraph would start it from its input node with no task.
So is a run whose context is wrong (:func:`admit_context`): an unknown or misspelt field, a
wrong value, a shared folder or thread id that cannot name its workspace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import START
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Command, StateUpdate
from langgraph_sdk.runtime import ServerRuntime
from pydantic import ValidationError

from planexec.compat.langgraph import parent_task_id
from planexec.concurrency import background
from planexec.context import Context, context_from_dict, context_of, run_context
from planexec.errors import PlanexecError
from planexec.nodes.conversation import input_task
from planexec.plan import Plan, to_doc
from planexec.redaction.secrets import redact, secret_values
from planexec.state import InputState, OutputState, PlanDoc, State
from planexec.storage.outputs import output_of
from planexec.storage.storable import text_size, unstorable_reason
from planexec.storage.thread_lock import ahold, hold, target
from planexec.tools.sandbox import Sandbox

MAX_TASK_CHARS = 20_000
"""Most characters of a task, or of feedback for the planner (each goes into a model prompt)."""
MAX_INPUT_CHARS = 1_000_000
"""Most characters of text in one thing a caller sends (an input, an answer, a state edit)."""


class InvalidInputError(PlanexecError, ValueError):
    """What a caller sent cannot be accepted; nothing was stored and the thread is unchanged."""


def check_input(value: Any, *, nested: bool = False) -> Any:
    """Refuse a run's input (a task, or a ``Command``) that cannot be accepted as it is.

    Return the input to run: the same, with an edited plan in its canonical form. A run
    ``nested`` in a parent graph gets the parent's whole state, which the parent's checkpoint
    already holds: only the keys planexec reads are checked there. A top-level run's whole
    input is written to its checkpoint as it is, so all of it must be storable.
    """
    if value is None:
        return None
    if isinstance(value, Command):
        if value.goto or value.graph is not None:
            raise InvalidInputError(
                "planexec routes its own runs: a Command may carry resume= and update=, not "
                "goto= or graph= (resume with Command(resume=answer), edit with update_state)"
            )
        if value.resume is None and value.update is None:
            raise InvalidInputError(
                "the Command carries nothing: resume with Command(resume=answer)"
            )
        if value.resume is not None:
            _check_storable(value.resume, "the resume answer")
            value = dataclasses.replace(value, resume=without_secrets(value.resume))
        if value.update is not None:
            update = _check_edit(value.update, "the command's state update")
            return dataclasses.replace(value, update=update)
        return value
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"a run starts from {{'task': '...'}}, not from a {type(value).__name__}"
        )
    try:
        task = input_task(value)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InvalidInputError(f"the input's messages are not chat messages: {exc}") from None
    if not isinstance(task, str) or not task.strip():
        raise InvalidInputError(
            "a run needs a non-empty text 'task', e.g. {'task': 'Sum sales'}, or 'messages' "
            "ending in the user's: {'messages': [{'role': 'user', 'content': 'Sum sales'}]}"
        )
    if len(task) > MAX_TASK_CHARS:
        raise InvalidInputError(
            f"the task is {len(task):,} characters long; at most {MAX_TASK_CHARS:,} are accepted"
        )
    _check_storable(
        {k: value[k] for k in INPUT_KEYS if k in value} if nested else value, "the input"
    )
    return value


INPUT_KEYS = tuple(InputState.__annotations__)
"""The keys of a run's input that planexec reads (LangGraph drops the others)."""


EDITABLE = frozenset({"task", "plan", "feedback"})
"""State keys a caller may edit (``update_state``, Studio's state editor, ``Command(update=)``).

Everything else is planexec's own record, written only by its nodes: above all ``approved``,
which only the approval node writes and the executor checks, so no edit can approve a plan.
An edited ``plan`` must be a plan document; it is validated again, and must be approved,
before it runs.
"""


def check_updates(
    supersteps: Sequence[Sequence[StateUpdate]],
) -> list[list[StateUpdate]]:
    """Refuse ``update_state`` values that cannot be stored or touch planexec's own records.

    Return the updates to apply: the same, with an edited plan in its canonical form. An
    edit written as the speculator is refused: that node runs only beside the approval's
    question, and the graph ends after it (the question would be dropped).
    """
    for superstep in supersteps:
        for update in superstep:
            if len(update) > 1 and update[1] == "speculator":
                raise InvalidInputError(
                    "update_state(as_node='speculator') is refused: the speculator runs only "
                    "beside the approval's question; write as another node (or none)"
                )
    return [
        [
            StateUpdate(_check_edit(update[0], "the state update"), *update[1:])
            for update in superstep
        ]
        for superstep in supersteps
    ]


def without_secrets(value: Any) -> Any:
    r"""Return what a caller sent (an answer, a state edit) with every known secret redacted.

    The one place secrets are taken out of what comes in through ``Command(resume=...)``,
    ``Command(update=...)`` and ``update_state``: past here nothing a caller sent holds one,
    not the checkpoint, the run's trace, a model's prompt, nor LangSmith feedback. Text that
    is JSON (a whole answer, an edited field Agent Chat UI sends as its text) is read too, at
    any depth, since a secret can be written escaped there (``\u0074ok-…``): where its
    decoded value held a secret, the text is that value redacted, written as JSON again
    (text that held none is kept as it was). :func:`~planexec.redaction.secrets.redact`
    does the rest (keys, values, lists, at any depth).
    """
    known = secret_values()
    if not known:
        return value
    try:
        return _without_secrets(value, known)
    except RecursionError:  # too deep to walk: refused as unstorable before it gets here
        return redact(value, known)


def _without_secrets(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        return _text_without_secrets(value, known)
    if isinstance(value, dict):
        return {_without_secrets(k, known): _without_secrets(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_secrets(v, known) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_secrets(v, known) for v in value)
    return redact(value, known)


def _text_without_secrets(text: str, known: list[str]) -> str:
    """Return ``text`` redacted; JSON text's decoded value redacted, written as JSON again."""
    plain: str = redact(text, known)
    if not text.lstrip().startswith(("{", "[", '"')):  # JSON text that can hold text
        return plain
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):  # not JSON: text
        return plain
    cleaned = _without_secrets(decoded, known)
    if cleaned == decoded:
        return plain
    return json.dumps(cleaned, ensure_ascii=False)


def _check_edit(values: Any, what: str) -> dict[str, Any] | None:
    if values is None:
        return None
    if isinstance(values, list | tuple) and all(
        isinstance(v, tuple) and len(v) == 2 for v in values
    ):
        values = dict(values)  # Command(update=[(key, value), ...])
    if not isinstance(values, dict):
        raise InvalidInputError(f"{what} must be a dict of state keys, not {type(values).__name__}")
    _check_storable(values, what)
    locked = sorted(set(values) - EDITABLE)
    if locked:
        raise InvalidInputError(
            f"{what} edits {', '.join(map(repr, locked))}: only "
            f"{', '.join(sorted(EDITABLE))} can be edited; the rest is planexec's own record "
            "(approvals, step results, revisions) and is written only by its nodes"
        )
    if "task" in values and (not isinstance(values["task"], str) or not values["task"].strip()):
        raise InvalidInputError(f"{what}: 'task' must be non-empty text")
    if "feedback" in values and not isinstance(values["feedback"], str | None):
        raise InvalidInputError(f"{what}: 'feedback' must be text")
    for key in ("task", "feedback"):
        if len(values.get(key) or "") > MAX_TASK_CHARS:
            raise InvalidInputError(f"{what}: '{key}' is longer than {MAX_TASK_CHARS:,} characters")
    values = without_secrets(values)  # as an answer's (:func:`without_secrets`)
    if "plan" in values and values["plan"] is not None:
        return {**values, "plan": canonical_plan(values["plan"], what)}
    return dict(values)


def canonical_plan(plan: Any, what: str) -> PlanDoc:
    """Return an edited plan document in the form planexec stores and runs, or refuse it.

    Types are checked strictly (a step id is an integer, not ``"1"`` or ``1.0``), and fields
    left out get their defaults, so what is validated, shown, hashed and run is one value.
    Tools and dependencies are checked at approval, with the run's tools and limits.
    """
    if not isinstance(plan, dict):
        raise InvalidInputError(
            f"{what}: 'plan' must be a plan document, not {type(plan).__name__}"
        )
    version = plan.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidInputError(f"{what}: the plan needs a positive integer 'version'")
    try:
        content = Plan.model_validate(
            {k: v for k, v in plan.items() if k != "version"}, strict=True
        )
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise InvalidInputError(f"{what}: the plan is not a plan document ({details})") from None
    return to_doc(content, version=version)


def _check_storable(value: Any, what: str) -> None:
    reason = unstorable_reason(value)
    if reason is not None:
        raise InvalidInputError(
            f"{what} cannot be stored: {reason}; nothing was changed, send it again without that"
        )
    size = text_size(value)
    if size > MAX_INPUT_CHARS:
        raise InvalidInputError(
            f"{what} is {size:,} characters of text; at most {MAX_INPUT_CHARS:,} are accepted "
            "at once (put big data in a file in the workspace)"
        )


def resumes(value: Any) -> bool:
    """Say whether a run's input continues a thread (``None`` or a ``Command``) or starts one."""
    return value is None or isinstance(value, Command)


def saved_at(
    graph: Any, config: RunnableConfig | None
) -> tuple[BaseCheckpointSaver[Any], RunnableConfig] | None:
    """Return the saver and the checkpoint a run of ``graph`` would continue from.

    As LangGraph reads it: the thread's latest checkpoint, or the one ``checkpoint_id``
    names (a root run given a ``checkpoint_ns`` runs on the thread's latest). None when the
    run keeps no checkpoints, or is nested in another run (whose checkpoint it continues).
    """
    found = target(graph, config)
    if found is None:
        return None
    saver, thread_id = found
    configurable = ensure_config(merge_configs(graph.config, config)).get("configurable") or {}
    wanted: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if configurable.get("checkpoint_id") and not configurable.get("checkpoint_ns"):
        wanted["checkpoint_id"] = configurable["checkpoint_id"]
    return saver, {"configurable": wanted}


def nothing_to_resume(config: RunnableConfig) -> InvalidInputError:
    """Build the refusal of a resume of a thread (or checkpoint) with no saved run."""
    wanted = config.get("configurable") or {}
    thread = f"thread {wanted.get('thread_id')}"
    if wanted.get("checkpoint_id"):
        return InvalidInputError(
            f"{thread} has no checkpoint {wanted['checkpoint_id']}: nothing to resume there "
            "(nothing was stored)"
        )
    return InvalidInputError(
        f"{thread} has nothing to resume: no run has started on it; start one with "
        "{'task': '...'} (nothing was stored)"
    )


def _has_run(saved: Any) -> bool:
    """Say whether a saved checkpoint holds a run: its task, or its input not yet applied.

    A run stopped right after its input was saved (a stream closed after its first event) has
    only the input; state edits alone (``update_state`` on a thread no run has started) have
    neither.
    """
    if saved is None:
        return False
    values = saved.checkpoint.get("channel_values") or {}
    return bool(values.get("task") or values.get(START))  # START: the input, not yet applied


def check_resumable(graph: Any, input: Any, config: RunnableConfig | None) -> None:
    """Refuse a resume (``None`` or a ``Command``) of a thread that has no saved run."""
    found = saved_at(graph, config) if resumes(input) else None
    if found is not None and not _has_run(found[0].get_tuple(found[1])):
        raise nothing_to_resume(found[1])


async def acheck_resumable(graph: Any, input: Any, config: RunnableConfig | None) -> None:
    """Async :func:`check_resumable`."""
    found = saved_at(graph, config) if resumes(input) else None
    if found is not None and not _has_run(await found[0].aget_tuple(found[1])):
        raise nothing_to_resume(found[1])


def admit_context(
    sandbox: Sandbox | None, config: RunnableConfig | None, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Refuse a run whose context is wrong, before anything runs; return the run's arguments.

    A dict given as ``context=`` becomes a :class:`Context` here, as LangGraph would make it
    (so an unknown or misspelt key is refused naming every wrong field), and a context
    planexec cannot read is refused (:func:`planexec.context.run_context`); then the run's
    workspace must be one the sandbox gives (its ``shared_folder``, or its thread id). A run
    nested in another reads the parent's context (planexec's settings in its ``planexec``
    field: :func:`planexec.context.context_of`), checked here the same way.
    """
    given = kwargs.get("context")
    # as LangGraph reads it: a graph called from a node or a tool runs in its parent's config
    config = merge_configs(ensure_config(), config)
    nested = is_nested(config)
    if given is None and nested:
        parents = context_of(_parent_context())
        if sandbox is not None:
            sandbox.check_run(parents, config)
        return kwargs
    passed_on = nested and not isinstance(given, Mapping)  # a parent's context, passed on
    context = context_of(given) if passed_on else run_context(given)
    if sandbox is not None:
        sandbox.check_run(context, config)
    return {**kwargs, "context": context} if isinstance(given, Mapping) else kwargs


def is_nested(config: RunnableConfig) -> bool:
    """Say whether a run is called from a parent graph's node or tool (its merged config)."""
    configurable = config.get("configurable") or {}
    return bool(configurable.get("checkpoint_ns") and parent_task_id(config))


def _parent_context() -> object:
    """Return the context of the run this nested run is called from (None if it has none)."""
    try:
        return get_runtime().context
    except (RuntimeError, AttributeError):  # not inside a run after all
        return None


class PlanexecGraph(CompiledStateGraph[State, Context, InputState, OutputState]):
    """The compiled planexec graph, with :mod:`planexec.admission`'s gate on every way in."""

    def __init__(self, *, sandbox: Sandbox | None = None, **attrs: Any) -> None:
        """Make the graph from a compiled one's attributes and the sandbox its runs use."""
        super().__init__(**attrs)
        self.sandbox = sandbox

    def step_output(self, config: RunnableConfig, step: int | str) -> Any:
        """Return a step's whole output in a thread: kept in state, or read back from its file.

        An output larger than the run's ``inline_output_limit`` is kept in a file outside
        every workspace (its record's ``output`` is None); this reads it back and checks it
        against its recorded size and SHA-256. ``KeyError`` if the step has no record.
        """
        return self._whole_output(self.get_state(config).values, step)

    async def astep_output(self, config: RunnableConfig, step: int | str) -> Any:
        """Return a step's whole output, as :meth:`step_output` (for async savers)."""
        values = (await self.aget_state(config)).values
        return await asyncio.to_thread(self._whole_output, values, step)

    def _whole_output(self, values: dict[str, Any], step: int | str) -> Any:
        record = (values.get("steps") or {})[str(step)]
        if record.get("output_file") is None or self.sandbox is None:
            return record.get("output")
        return output_of(record, self.sandbox.output_store())

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Check the input, hold the thread, then stream the run (``invoke`` comes here)."""
        input, kwargs = self._admitted(input, config, kwargs)
        with hold(self, config):
            check_resumable(self, input, config)
            yield from self._stoppable(super().stream(input, config, **kwargs))

    @staticmethod
    def _stoppable(parts: Iterator[Any]) -> Iterator[Any]:
        """Stream a sync run that stops at once when its reader stops (see :class:`RunScope`).

        The run's work on the background loop is collected in a scope, in a context of the
        run's own. A closed stream stops it before LangGraph waits for the threads that wait
        on it; so does Ctrl-C, in the main thread (:func:`background.watch_sigint`).
        """
        scope = background.RunScope()
        ctx = background.run_context(scope)
        background.watch_sigint(scope)
        try:
            while True:
                try:
                    part = ctx.run(next, parts)
                except StopIteration:
                    return
                yield part
        except BaseException:  # a closed stream (GeneratorExit), Ctrl-C...: stop the work
            scope.stop()
            raise
        finally:
            close = getattr(parts, "close", None)  # LangGraph's stream is a generator
            if close is not None:
                ctx.run(close)
            background.unwatch_sigint(scope)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Check the input, hold the thread, then stream the run (``ainvoke``, the server)."""
        input, kwargs = self._admitted(input, config, kwargs)
        async with ahold(self, config):
            await acheck_resumable(self, input, config)
            async for part in super().astream(input, config, **kwargs):
                yield part

    def _admitted(
        self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        """Return a run's input and arguments once both are admitted, or refuse them."""
        merged = merge_configs(ensure_config(), self.config, config)
        input = check_input(input, nested=is_nested(merged))
        return input, admit_context(self.sandbox, merged, kwargs)

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """Check state edits (``update_state`` comes here), then apply them."""
        updates = check_updates(supersteps)
        with hold(self, config):
            return super().bulk_update_state(config, updates)

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """Check state edits (``aupdate_state`` and the server's state edits), then apply."""
        updates = check_updates(supersteps)
        async with ahold(self, config):
            return await super().abulk_update_state(config, updates)


def admit(
    compiled: CompiledStateGraph[State, Context, InputState, OutputState],
    sandbox: Sandbox | None = None,
) -> PlanexecGraph:
    """Return ``compiled`` as a :class:`PlanexecGraph` (same nodes, channels and settings).

    ``sandbox``: where its runs' workspaces are, checked for each run before it starts.
    """
    attrs = {k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"}
    return PlanexecGraph(**attrs, sandbox=sandbox)


SERVER_KEYS = frozenset(
    {"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map", "run_id", "assistant_id",
     "graph_id", "user_id", "cron_id"}
)  # fmt: skip
"""LangGraph's own configurable keys: a client that sends ``config`` rather than ``context``
gets them mirrored into the context by the server; they are not planexec settings."""


def check_sent_context(sent: Any) -> None:
    """Refuse a run's context as its client sent it: every unknown field and wrong value.

    Raises :class:`~planexec.context.InvalidContextError` (the run's error the client sees).
    Keys of LangGraph's own (:data:`SERVER_KEYS`) are not checked.
    """
    if isinstance(sent, Mapping):
        context_from_dict({k: v for k, v in sent.items() if not _servers_own(k)})


def _servers_own(key: object) -> bool:
    # x-* headers, langgraph_auth_*, __...__ tracing keys: the server adds them to configurable
    return isinstance(key, str) and key in SERVER_KEYS


def serving(compiled: PlanexecGraph) -> Callable[[ServerRuntime[Any]], PlanexecGraph]:
    """Return a LangGraph server graph factory for ``compiled`` that checks each run's context.

    For a planexec graph you serve yourself (your own ``langgraph.json``): ``graph =
    serving(build_graph(...))``; the factory returns ``compiled`` itself, so it costs nothing.
    """

    def factory(runtime: ServerRuntime[Any]) -> PlanexecGraph:
        execution = runtime.execution_runtime
        if execution is not None:
            check_sent_context(execution.context)
        return compiled

    factory.__doc__ = f"The graph {compiled.name!r}, checking each run's context as it was sent."
    return factory
