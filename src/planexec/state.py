"""Graph state: the plan artifact, its revisions and every step's record, all JSON-native.

Pydantic models (``planexec.plan``) validate plans at the model and human boundaries; state
stores their ``model_dump()`` so checkpoints, Studio and the API see plain JSON.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

StepStatus = Literal["pending", "succeeded", "failed", "skipped"]
ApprovalAction = Literal[
    "approve", "edit", "reject", "cancel", "auto", "refused", "not_approved", "presented"
]
EvaluationDecision = Literal["finish", "retry", "replan", "give_up", "ask"]
FinalStatus = Literal["succeeded", "partial", "failed", "cancelled"]


class StepDoc(TypedDict):
    """One step of a plan, as stored in state."""

    id: int
    tool: str | None
    tools: list[str]
    """Tools the executor model may call in a ``"tool": null`` step (empty: none)."""
    args: dict[str, Any]
    description: str
    depends_on: list[int]
    expected_output: str
    on_failure: NotRequired[str | dict[str, int]]
    """``"replan"`` (also when absent), ``"skip"``, ``"ask"``, or ``{"retry": N}``."""


class PlanDoc(TypedDict):
    """The plan artifact: a goal, its steps, and a version that grows with each revision."""

    goal: str
    steps: list[StepDoc]
    version: int


class ApprovedPlan(TypedDict):
    """The one plan the executor may run: its version and content digest, and who approved it."""

    version: int
    digest: str
    by: Literal["reviewer", "policy"]


class ProposedPlan(TypedDict, total=False):
    """Which node made the current plan, and the digest it had then.

    A replanner's revision also names the plan it revised (``base``) and the steps it added
    (``added``): the ``first`` policy lets it run unasked only if it revised the approved plan
    and added no step that may call a side-effecting tool.
    """

    version: int
    digest: str
    by: Literal["planner", "replanner", "reviewer", "memory"]
    base: str
    added: list[int]


class ApprovalRecord(TypedDict, total=False):
    """The latest decision at the approval step: a reviewer's, the policy's, or a refusal."""

    action: ApprovalAction
    version: int
    digest: str
    reason: str
    error: str
    asked_at: str
    """When a ``presented`` request was shown (ISO-8601 UTC): its expiry counts from here."""
    speculate: bool
    """Set on a ``presented`` record when steps of the plan run while it is asked about, and
    on the ``reject`` or ``cancel`` answering it: the speculator then discards their results."""


class FailureQuestion(TypedDict):
    """The question about a failed step being asked: which step, about which plan, since when."""

    step: int
    digest: str
    asked_at: str


IdentitySource = Literal["server", "cli", "python", "policy", "unknown"]


class Identity(TypedDict):
    """Who made a decision or started a run, and who vouched for it (``id``: None if unknown).

    Read only by :mod:`planexec.review.identity`.
    """

    id: str | None
    source: IdentitySource


class EditedRevision(TypedDict):
    """The revision an ``edit`` decision made: its version and digest."""

    version: int
    digest: str


class Decision(TypedDict, total=False):
    """One decision in the thread's audit trail (``decisions``, append-only).

    Plans: ``approve``, ``edit``, ``reject``, ``cancel``, ``refused``, ``expired`` (and
    ``approve`` by the policy, ``by.source == "policy"``). Failed steps (``kind:
    "step_failure"``): ``retry``, ``edit``, ``skip``, ``replan``, ``cancel``, ``refused``,
    ``expired``. Written only by the approval and failure review nodes; never editable.
    """

    action: str
    kind: Literal["plan", "step_failure"]
    by: Identity
    at: str
    """ISO-8601 UTC time of the decision (e.g. ``2026-11-26T09:30:00.123456+00:00``)."""
    version: int
    digest: str
    step: int
    feedback: str
    """Reject feedback, cancel reason, replan hint or refusal reason, when there is one."""
    edited: EditedRevision


class RefusedCall(TypedDict):
    """A tool call a step's executor model made that its step does not list: not run."""

    tool: str
    args: str
    """The call's arguments as JSON text, secrets redacted, cut at 500 characters."""
    reason: str
    attempt: int


class OutputFile(TypedDict):
    """A large output's file, outside every workspace; only the executor writes this field."""

    id: str
    bytes: int
    sha256: str
    preview: str


class StepRecord(TypedDict, total=False):
    """What happened to one step of the current plan.

    Keyed and made in :mod:`planexec.plan.records`.

    ``step_digest`` names the exact step content the result belongs to: a record whose step
    was changed since (by an edit, a state edit or a fork) no longer counts as finished.
    A large output is not in ``output`` (then None) but in the file ``output_file`` names;
    read outputs with :func:`planexec.storage.outputs.output_of`.
    """

    status: StepStatus
    attempts: int
    started_at: float | None
    ended_at: float | None
    summary: str
    output: Any
    output_file: OutputFile
    error: str | None
    checked: bool
    judged_retry: bool  # re-run after a judge's rejection (of it or a step it depends on)
    step_digest: str
    refused_calls: list[RefusedCall]
    """Present when the step's model asked for tools its step does not list (first 20)."""
    speculative: bool
    """Present (true) when the step ran while its plan awaited approval, and the approved plan
    took its result (the same step, the same inputs: :mod:`planexec.execution.speculation`)."""
    replayed: bool
    """Present (true) when a tool call of the step was served from a recording
    (:mod:`planexec.recording`): the tool did not run, the files it names were not written."""


class SpeculatedStep(TypedDict):
    """A step that ran before its plan was approved (:mod:`planexec.execution.speculation`).

    ``key`` names exactly what it ran under: the step's content and, through their own keys or
    records, every step it depends on. The executor adopts ``record`` for a step of the approved
    plan only if that step's key there is the same; otherwise it is thrown away, never shown
    as a result of the approved plan.
    """

    key: str
    where: str
    """What else it ran against: the run's workspace and executor model
    (:func:`planexec.execution.speculation.where_of`); another place runs the step again."""
    version: int
    """The version of the plan shown for approval when it ran (what the reviewer saw)."""
    record: StepRecord


def merge_speculated(
    left: dict[str, SpeculatedStep] | None, right: dict[str, SpeculatedStep] | None
) -> dict[str, SpeculatedStep]:
    """Reducer of ``State.speculated``: add a speculator's results; None discards them all."""
    if right is None:
        return {}
    return {**(left or {}), **right}


class Revision(TypedDict):
    """An earlier plan, why it was replaced, and how its steps had ended."""

    version: int
    reason: str
    plan: PlanDoc
    outcomes: dict[str, StepRecord]


class Evaluation(TypedDict):
    """The evaluator's verdict on the latest execution round."""

    decision: EvaluationDecision
    reason: str
    retry: list[int]


class RoleUsage(TypedDict):
    """LLM calls and tokens spent by one role (planner, executor, evaluator, replanner)."""

    calls: int
    input_tokens: int
    output_tokens: int


FailureAction = Literal["retry", "edit", "skip", "replan", "cancel", "refused"]


class FailureAnswer(TypedDict, total=False):
    """What a reviewer answered about a failed step (or why the answer was refused)."""

    action: FailureAction
    step: int
    hint: str
    reason: str
    error: str


BudgetName = Literal["tokens", "cost", "seconds"]


class BudgetStop(TypedDict):
    """Which budget stopped the run, its limit, and what was spent when it was checked."""

    budget: BudgetName
    limit: float
    spent: float


class FinalResult(TypedDict):
    """The run's outcome: an answer, the files it made, and what failed.

    ``budget`` is there when a spent budget (:mod:`planexec.spending.budget`) ended the run, or
    when
    the run ended past one (calls and steps in flight when it was spent finished).
    """

    status: FinalStatus
    answer: str
    artifacts: list[str]
    failed_steps: list[dict[str, Any]]
    budget: NotRequired[BudgetStop]


def add_usage(
    left: dict[str, RoleUsage] | None, right: dict[str, RoleUsage] | None
) -> dict[str, RoleUsage]:
    """Reducer summing LLM usage per role."""
    merged: dict[str, RoleUsage] = dict(left or {})
    for role, usage in (right or {}).items():
        before = merged.get(role, RoleUsage(calls=0, input_tokens=0, output_tokens=0))
        merged[role] = RoleUsage(
            calls=before["calls"] + usage["calls"],
            input_tokens=before["input_tokens"] + usage["input_tokens"],
            output_tokens=before["output_tokens"] + usage["output_tokens"],
        )
    return merged


class InputState(TypedDict, total=False):
    """What a run starts from: a ``task``, or ``messages`` ending in the user's task."""

    task: str
    messages: Annotated[list[AnyMessage], add_messages]


class OutputState(TypedDict, total=False):
    """What a run returns and ``updates``/``values`` streams show (Studio, the SDK)."""

    task: str
    messages: Annotated[list[AnyMessage], add_messages]
    plan: PlanDoc | None
    revisions: Annotated[list[Revision], operator.add]
    steps: dict[str, StepRecord]
    approval: ApprovalRecord | None
    decisions: Annotated[list[Decision], operator.add]
    evaluation: Evaluation | None
    usage: Annotated[dict[str, RoleUsage], add_usage]
    final: FinalResult | None
    error: str | None
    speculated: Annotated[dict[str, SpeculatedStep], merge_speculated]
    speculation_usage: Annotated[dict[str, RoleUsage], add_usage]


class StepSummary(TypedDict):
    """One step of a plan, as a parent graph sees it: what it does and with which tools."""

    id: int
    description: str
    tool: str | None
    tools: list[str]
    """Tools the executor model may call in a ``"tool": null`` step (empty: none)."""


class PlanSummary(TypedDict):
    """The plan a run ended with: its goal, version, content digest and steps."""

    goal: str
    version: int
    digest: str
    """SHA-256 of the goal and steps: the digest the approval request showed."""
    steps: list[StepSummary]


class PlanexecSummary(TypedDict):
    """What an embedded run gives its parent under the ``planexec`` key (and a tool's artifact).

    ``status``, ``answer``, ``artifacts`` and ``failed_steps`` (the ids of the steps that did
    not succeed) come from the run's final result; ``plan`` is None when no plan was made.
    """

    task: str
    status: FinalStatus
    answer: str
    artifacts: list[str]
    failed_steps: list[int]
    plan: PlanSummary | None
    revisions: int
    """How many times the plan was revised."""
    usage: dict[str, RoleUsage]
    error: str | None


class EmbeddedOutput(TypedDict, total=False):
    """What ``build_graph(output="embedded")`` returns, and so all it writes to a parent.

    ``messages``: the run's chat (the task, the plan shown for approval, the answer);
    ``planexec``: the :class:`PlanexecSummary`. Nothing else, so a parent's own keys named
    like planexec's records (``plan``, ``steps``, ``error``, ``usage``...) are never touched.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    planexec: PlanexecSummary


class State(TypedDict):
    """The whole checkpointed state of a planexec thread."""

    task: str
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    task_message: NotRequired[str | None]
    """Id of the human message the current task came from."""
    task_text: NotRequired[str | None]
    """That message's text when the task was taken (an edit in place changes it)."""
    plan: NotRequired[PlanDoc | None]
    revisions: NotRequired[Annotated[list[Revision], operator.add]]
    steps: NotRequired[dict[str, StepRecord]]
    feedback: NotRequired[str | None]
    approval: NotRequired[ApprovalRecord | None]
    approved: NotRequired[ApprovedPlan | None]
    decisions: NotRequired[Annotated[list[Decision], operator.add]]
    """Every decision about this thread's plans and failed steps, oldest first (append-only)."""
    started_by: NotRequired[Identity | None]
    """Who started the current run (written by intake)."""
    proposed: NotRequired[ProposedPlan | None]
    planning_errors: NotRequired[list[str]]
    evaluation: NotRequired[Evaluation | None]
    replans: NotRequired[int]
    usage: NotRequired[Annotated[dict[str, RoleUsage], add_usage]]
    busy_seconds: NotRequired[Annotated[float, operator.add]]
    """Working time of the run's nodes (not its waits for a human), for the time budget."""
    plan_origin: NotRequired[dict[str, str] | None]
    """Where plan memory took the current plan from (:class:`planexec.memory.recall.PlanOrigin`)."""
    failure_answer: NotRequired[FailureAnswer | None]
    """The latest answer about a failed step whose plan said ``on_failure: "ask"``."""
    failure_question: NotRequired[FailureQuestion | None]
    """The question about a failed step now asked (written when it is first shown)."""
    failure_asks: NotRequired[dict[str, int]]
    """How many times each step's failure was asked about (bounded)."""
    reviewer_skipped: NotRequired[list[int]]
    """Failed steps a reviewer chose to go on without (like ``on_failure: "skip"``)."""
    budget_stop: NotRequired[BudgetStop | None]
    """The budget that was spent when a node found it so (the finalizer reports it)."""
    speculated: NotRequired[Annotated[dict[str, SpeculatedStep], merge_speculated]]
    """Read-only steps that ran while the plan awaited approval (not yet approved results)."""
    speculation_usage: NotRequired[Annotated[dict[str, RoleUsage], add_usage]]
    """What speculation spent (per role), apart from ``usage``; budgets count both."""
    final: NotRequired[FinalResult | None]
    error: NotRequired[str | None]


Finished = Literal["succeeded", "failed", "skipped"]  # a StepStatus other than "pending"


class StepOutcome(TypedDict):
    """How one step ended in this round: the result of its durable task."""

    id: int
    status: Finished
    attempts: int
    started_at: float | None
    ended_at: float | None
    output: Any
    summary: str
    error: str | None
    usage: dict[str, RoleUsage]
    output_file: NotRequired[OutputFile]
    """Only for a spilled output (see :mod:`planexec.storage.outputs`); ``output`` is then None."""
    refused_calls: NotRequired[list[RefusedCall]]
    replayed: NotRequired[bool]
    """True when a tool call of the step was served from a recording (see StepRecord)."""
    ran: NotRequired[str]
    """Digest of the step that ran (:func:`planexec.execution.outcomes.ran_digest`): a replayed
    result counts only for it."""
