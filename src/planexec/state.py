"""Graph state: the plan artifact, its revisions and every step's record, all JSON-native.

Pydantic models (``planexec.plan``) validate plans at the model and human boundaries;
state stores their ``model_dump()`` so checkpoints, Studio and the API see plain JSON.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired

from typing_extensions import TypedDict

StepStatus = Literal["pending", "running", "succeeded", "failed", "skipped"]
Decision = Literal["finish", "retry", "replan", "give_up"]
FinalStatus = Literal["succeeded", "partial", "failed", "cancelled"]


class StepDoc(TypedDict):
    """One step of a plan, as stored in state."""

    id: int
    tool: str | None
    args: dict[str, Any]
    description: str
    depends_on: list[int]
    expected_output: str


class PlanDoc(TypedDict):
    """The plan artifact: a goal, its steps, and a version that grows with each revision."""

    goal: str
    steps: list[StepDoc]
    version: int


class StepRecord(TypedDict, total=False):
    """What happened to one step of the current plan."""

    status: StepStatus
    attempts: int
    started_at: float | None
    ended_at: float | None
    summary: str
    output: Any
    error: str | None
    checked: bool
    judged_retry: bool  # re-run after a judge's rejection (of it or a step it depends on)


class Revision(TypedDict):
    """An earlier plan, why it was replaced, and how its steps had ended."""

    version: int
    reason: str
    plan: PlanDoc
    outcomes: dict[str, StepRecord]


class Evaluation(TypedDict):
    """The evaluator's verdict on the latest execution round."""

    decision: Decision
    reason: str
    retry: list[int]


class RoleUsage(TypedDict):
    """LLM calls and tokens spent by one role (planner, executor, evaluator, replanner)."""

    calls: int
    input_tokens: int
    output_tokens: int


class FinalResult(TypedDict):
    """The run's outcome: an answer, the files it made, and what failed."""

    status: FinalStatus
    answer: str
    artifacts: list[str]
    failed_steps: list[dict[str, Any]]


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


class InputState(TypedDict):
    """What a run starts from: the user's task."""

    task: str


class OutputState(TypedDict, total=False):
    """What a run returns."""

    task: str
    plan: PlanDoc | None
    steps: dict[str, StepRecord]
    final: FinalResult | None
    error: str | None


class State(TypedDict):
    """The whole checkpointed state of a planexec thread."""

    task: str
    plan: NotRequired[PlanDoc | None]
    revisions: NotRequired[Annotated[list[Revision], operator.add]]
    steps: NotRequired[dict[str, StepRecord]]
    feedback: NotRequired[str | None]
    approval: NotRequired[dict[str, Any] | None]
    approved_version: NotRequired[int]
    approved_tools: NotRequired[list[str]]
    planning_errors: NotRequired[list[str]]
    evaluation: NotRequired[Evaluation | None]
    replans: NotRequired[int]
    usage: NotRequired[Annotated[dict[str, RoleUsage], add_usage]]
    final: NotRequired[FinalResult | None]
    error: NotRequired[str | None]
