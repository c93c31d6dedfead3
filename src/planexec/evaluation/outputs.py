"""What the evaluation target returns for one example, and what an evaluator returns."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class ExecutedCall(TypedDict):
    """A tool step that ran: its step id, tool (the planner's name), arguments as planned.

    ``args`` are the plan's arguments, references such as ``$1.dataset`` unresolved.
    """

    step: int
    tool: str
    args: dict[str, Any]
    status: str


class FailedStep(TypedDict):
    """A step of the final plan that did not succeed: its id, tool, status and error."""

    step: int
    tool: str | None
    status: str
    error: str | None


class TargetOutputs(TypedDict):
    """One example's run, as the evaluators read it (``langsmith.evaluate``'s outputs).

    ``status``: the run's final status (``succeeded``, ``partial``, ``failed``, ``cancelled``),
    ``unfinished`` when it stopped without one, ``error`` when it could not run (``error``
    says why). ``planned_tools``: the first plan's tools in plan order, as the planner names
    them (``server__tool`` for MCP tools); ``trajectory``: the tool steps that ran, in the order
    they started, across revisions. ``plan_valid_first_time``: the planner's first draft was
    valid (None: no planner call, e.g. a plan from plan memory). ``step_outputs``: each step's
    output by step id (a spilled one as its size and SHA-256). ``failed_steps``: the final
    plan's steps that did not succeed, with their errors (a replay's missing recording names
    the arguments that differ there).
    """

    thread_id: str
    status: str
    answer: str
    planned_tools: list[str]
    trajectory: list[ExecutedCall]
    plan_valid_first_time: bool | None
    steps_run: int
    model_calls: int
    tokens: int
    cost: float
    wall_seconds: float
    step_outputs: dict[str, Any]
    failed_steps: list[FailedStep]
    error: str | None


class EvalScore(TypedDict):
    """One evaluator's verdict: its key, a score (1 pass, 0 fail, None: not asked), why."""

    key: str
    score: int | None
    comment: str
