"""The evaluation target: one example run non-interactively, its outcome as evaluators read it.

Each example runs in a workspace of its own (its data files copied in), its plan approved by
policy (approval ``never``: the approval records ``by: policy``), plan memory off unless
asked, with the tools ``planexec run`` would have (``--tools``, ``--mcp``: give a registry) and
optionally a :class:`~planexec.recording.Recording` (steps served from, or written to, a
folder: example X's in its subfolder ``X``, so two examples never share a recording). A failed
step whose plan asks (``on_failure: "ask"``) is answered by policy as ``planexec run --yes``
answers it: replan (the decision names :data:`POLICY_CALLER`). Unless the results are
uploaded, LangSmith tracing is off around the run: langsmith 0.15 posts a target's nested runs
even under ``upload_results=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langsmith import run_helpers

from planexec.admission import PlanexecGraph
from planexec.concurrency import background
from planexec.context import Context
from planexec.errors import ConfigurationError
from planexec.evaluation.dataset import EVAL_CHOSEN
from planexec.evaluation.outputs import ExecutedCall, FailedStep, TargetOutputs
from planexec.graph import build_graph
from planexec.redaction.secrets import scrub_text
from planexec.runs import RunRequest, new_run
from planexec.runs.streaming import adrive
from planexec.runs.types import Caller, ReviewRequest
from planexec.spending.budget import ROLE_MODELS, cost_of, price_of
from planexec.state import PlanDoc, RoleUsage, StepRecord
from planexec.tools import ToolRegistry, ToolsLike

if TYPE_CHECKING:
    from planexec.recording import Recording

logger = logging.getLogger(__name__)

RAN = frozenset({"succeeded", "failed"})
"""Step statuses of a step that ran (skipped and pending ones did not)."""
POLICY_CALLER = Caller(id="policy:eval", source="policy")
"""Who the decisions eval makes by policy are recorded as (answers to failed steps)."""


def policy_answer(request: ReviewRequest) -> dict[str, Any]:
    """Answer a run's question as ``planexec run --yes`` does: a failed step replans.

    A plan to approve (not asked under approval ``never``) is approved.
    """
    if request.get("type") == "step_failure":
        step: Any = request.get("step") or {}
        return {"action": "replan", "step": step.get("id")}
    return {"action": "approve"}


@dataclass
class EvalTarget:
    """Runs one example (``inputs``: ``task``, ``data``, ``context``) and returns its outcome.

    ``options``: context fields for every example (over the example's own: the CLI's
    ``--planner-model`` and friends). ``memory``: plan memory on, shared by the examples of
    this target. ``recording``: example X records to (or replays from) its subfolder
    (``Recording.part(X)``; ``inputs["id"]``, else a name made from the inputs). ``upload``:
    results go to LangSmith, so the run is traced as the environment says; otherwise tracing
    is off around it. ``workspace_root``: the folder holding each example's workspace, kept
    after the run; by default each example runs in a temporary folder, removed once its
    outcome is read.

    Use it as ``langsmith.evaluate(target, ...)`` (sync) or ``aevaluate(target.arun, ...)``::

        target = EvalTarget(options={"planner_model": "openai:gpt-4.1"})
        outputs = target({"task": "Summarise sales.csv", "data": ["sales.csv"]})
    """

    tools: ToolsLike | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    memory: bool = False
    recording: Recording | None = None
    upload: bool = False
    workspace_root: Path | None = None
    _saver: InMemorySaver = field(default_factory=InMemorySaver, init=False, repr=False)
    _store: InMemoryStore = field(default_factory=InMemoryStore, init=False, repr=False)

    def __post_init__(self) -> None:
        """Check the tools and the workspaces' folder once."""
        self.registry = ToolRegistry.of(self.tools) if self.tools is not None else None
        if self.workspace_root is not None:
            root = Path(self.workspace_root)
            if root.exists() and not root.is_dir():
                raise ConfigurationError(f"workspace folder {root} is not a folder")
            self.workspace_root = root

    def __call__(self, inputs: Mapping[str, Any]) -> TargetOutputs:
        """Run the example (the target ``langsmith.evaluate`` takes): :meth:`arun`, waited for.

        It runs on planexec's background loop (:mod:`planexec.concurrency.background`), so
        ``evaluate``'s threads each wait for their example; never raises for the run's own
        failures.
        """
        return background.run_blocking(lambda: self.arun(inputs))

    async def arun(self, inputs: Mapping[str, Any]) -> TargetOutputs:
        """Run the example (``graph.astream``): the target ``aevaluate`` takes.

        A run that raised (a model with no reply left, say) is reported as it stood: status
        ``error``, the error, and the steps that had failed by then.
        """
        clock = time.monotonic()
        with self._workspace() as root:
            try:
                graph, request = await asyncio.to_thread(self._prepared, inputs, root)  # copies
            except Exception as exc:
                return _failed(exc, clock)
            config = request.config(POLICY_CALLER)
            try:
                with self._tracing():
                    values, _ = await adrive(
                        graph, config, request.context, _first(request), None, policy_answer
                    )
            except Exception as exc:
                values = (await graph.aget_state(config)).values
                return outputs_of(values, request, time.monotonic() - clock, one_line(exc))
            return outputs_of(values, request, time.monotonic() - clock)

    def context_of(self, inputs: Mapping[str, Any]) -> Context:
        """Return an example's run context: its own fields, then ``options``, memory as set.

        Of the example's fields, those eval decides (:data:`EVAL_CHOSEN`: approval, plan
        memory, shared folder, model prices) are dropped: a dataset never sets them.
        """
        own = dict(inputs.get("context") or {})
        given = {k: v for k, v in own.items() if k not in EVAL_CHOSEN}
        given |= {k: v for k, v in self.options.items() if v is not None}
        given["plan_memory"] = self.memory
        given.pop("approval", None)  # approved by policy: the operator's "never"
        return Context(**given)

    @contextlib.contextmanager
    def _workspace(self) -> Iterator[Path]:
        """Yield the folder an example's workspace goes in: the root given, or a temporary one.

        A temporary one is removed when the example's outcome has been read.
        """
        if self.workspace_root is not None:
            yield self.workspace_root
            return
        folder = Path(tempfile.mkdtemp(prefix="planexec-eval-"))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if folder.exists():  # a tool left something it may not remove (a read-only folder)
                logger.warning("could not remove the example's temporary workspace %s", folder)

    def _prepared(self, inputs: Mapping[str, Any], root: Path) -> tuple[PlanexecGraph, RunRequest]:
        thread_id = str(uuid.uuid4())
        request = new_run(
            str(inputs["task"]),
            workspace=root / thread_id,
            data=[Path(p) for p in inputs.get("data") or []],
            thread_id=thread_id,
            context=self.context_of(inputs),
            tools=self.registry,
        )
        extra: dict[str, Any] = {}
        if self.recording is not None:
            extra["recording"] = self.recording.part(example_name(inputs))
        graph = build_graph(
            self._saver,
            tools=self.registry,
            sandbox=request.sandbox,
            approval="never",
            store=self._store if self.memory else None,
            **extra,
        )
        return graph, request

    @contextlib.contextmanager
    def _tracing(self) -> Iterator[None]:
        if self.upload:
            yield
            return
        with run_helpers.tracing_context(enabled=False):
            yield


def example_name(inputs: Mapping[str, Any]) -> str:
    """Return the name of an example's recording: its ``id``, else one made from its inputs.

    Made from the task, the context and each data file's name and content (not its path: a
    recording replays in another checkout), so an example keeps its recording wherever its line
    moves, and two examples with different data never share one.
    """
    given = inputs.get("id")
    if isinstance(given, str) and given:
        return given
    data = [
        [Path(p).name, hashlib.sha256(Path(p).read_bytes()).hexdigest()]
        for p in inputs.get("data") or []
    ]
    made = {"task": inputs.get("task"), "context": inputs.get("context") or {}, "data": data}
    shown = json.dumps(made, sort_keys=True, default=str)
    return "inputs-" + hashlib.sha256(shown.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _first(request: RunRequest) -> dict[str, Any]:
    return {"task": request.task}


def one_line(exc: BaseException) -> str:
    """Return an exception in one scrubbed line of at most 500 characters."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return scrub_text(f"{type(exc).__name__}: {text}"[:500])


def _failed(exc: Exception, clock: float) -> TargetOutputs:
    return TargetOutputs(
        thread_id="", status="error", answer="", planned_tools=[], trajectory=[],
        plan_valid_first_time=None, steps_run=0, model_calls=0, tokens=0, cost=0.0,
        wall_seconds=time.monotonic() - clock, step_outputs={}, failed_steps=[],
        error=one_line(exc),
    )  # fmt: skip


def outputs_of(
    values: Mapping[str, Any], request: RunRequest, wall: float, raised: str | None = None
) -> TargetOutputs:
    """Return what the evaluators read of a run's values (``raised``: why the run stopped)."""
    final = values.get("final") or {}
    usage: dict[str, RoleUsage] = values.get("usage") or {}
    trajectory = executed_calls(values)
    planner = usage.get("planner")
    status = "error" if raised else str(final.get("status") or "unfinished")
    return TargetOutputs(
        thread_id=request.thread_id,
        status=status,
        answer=str(final.get("answer") or ""),
        planned_tools=planned_tools(values),
        trajectory=trajectory,
        plan_valid_first_time=(planner["calls"] == 1 and bool(values.get("plan")))
        if planner
        else None,
        steps_run=len(trajectory) + _model_steps_run(values),
        model_calls=sum(u["calls"] for u in usage.values()),
        tokens=sum(u["input_tokens"] + u["output_tokens"] for u in usage.values()),
        cost=round(run_cost(usage, request.context), 8),
        wall_seconds=round(wall, 3),
        step_outputs=step_outputs(values.get("steps") or {}),
        failed_steps=failed_steps(values),
        error=raised or values.get("error") or None,
    )


def failed_steps(values: Mapping[str, Any]) -> list[FailedStep]:
    """Return the steps that did not succeed: the final result's, else the failed records'."""
    final = values.get("final") or {}
    if final:
        return [
            FailedStep(
                step=f["step"],
                tool=f.get("tool"),
                status=str(f.get("status")),
                error=f.get("error"),
            )  # fmt: skip
            for f in final.get("failed_steps") or []
        ]
    plan = values.get("plan") or {"steps": []}
    records = values.get("steps") or {}
    return [
        FailedStep(step=s["id"], tool=s.get("tool"), status="failed", error=record.get("error"))
        for s in plan["steps"]
        if (record := records.get(str(s["id"])) or {}).get("status") == "failed"
    ]


def run_cost(usage: Mapping[str, RoleUsage], context: Context) -> float:
    """Return what a run's model calls cost (USD; unpriced models count 0)."""
    total = 0.0
    for role, spent in usage.items():
        spec = getattr(context, ROLE_MODELS.get(role, "planner_model"))
        total += cost_of(spent, price_of(spec, context.model_prices))
    return total


def planned_tools(values: Mapping[str, Any]) -> list[str]:
    """Return the first plan's tools in plan order (a step with no tool: its tools, if any)."""
    revisions = values.get("revisions") or []
    plan: PlanDoc | None = revisions[0]["plan"] if revisions else values.get("plan")
    if not plan:
        return []
    return [str(s["tool"]) for s in plan["steps"] if s.get("tool")]


def _plans_and_records(values: Mapping[str, Any]) -> list[tuple[PlanDoc, dict[str, StepRecord]]]:
    pairs = [(r["plan"], r["outcomes"]) for r in values.get("revisions") or []]
    if values.get("plan"):
        pairs.append((values["plan"], values.get("steps") or {}))
    return pairs


def executed_calls(values: Mapping[str, Any]) -> list[ExecutedCall]:
    """Return the tool steps that ran, across revisions, in the order they started."""
    seen: dict[tuple[float, int, str], ExecutedCall] = {}
    for plan, records in _plans_and_records(values):
        for s in plan["steps"]:
            record = records.get(str(s["id"])) or {}
            started = record.get("started_at")
            if not s.get("tool") or record.get("status") not in RAN or started is None:
                continue
            call = ExecutedCall(step=s["id"], tool=str(s["tool"]), args=dict(s.get("args") or {}),
                                status=str(record.get("status")))  # fmt: skip
            seen.setdefault((started, s["id"], call["tool"]), call)
    return [seen[k] for k in sorted(seen)]


def _model_steps_run(values: Mapping[str, Any]) -> int:
    plan = values.get("plan") or {"steps": []}
    records = values.get("steps") or {}
    return sum(
        1
        for s in plan["steps"]
        if not s.get("tool") and (records.get(str(s["id"])) or {}).get("status") in RAN
    )


def step_outputs(records: Mapping[str, StepRecord]) -> dict[str, Any]:
    """Return each step's output by id: inline, or a spilled one's size and SHA-256."""
    shown: dict[str, Any] = {}
    for key, record in records.items():
        if "output" in record:
            shown[key] = record["output"]
        elif "output_file" in record:
            spilled = record["output_file"]
            shown[key] = {k: v for k, v in spilled.items() if k != "id"}
    return shown
