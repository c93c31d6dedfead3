"""Run-time configuration: models, limits and policies, editable per assistant in Studio."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

ApprovalPolicy = Literal["always", "first", "never"]


@dataclass(kw_only=True)
class Context:
    """Settings of one run, passed as ``graph.invoke(..., context=Context(...))``.

    Model names are ``"openai:MODEL"`` (any OpenAI-compatible endpoint through
    ``OPENAI_BASE_URL``) or ``"scripted:PATH"`` (a recorded reply file, for offline runs).
    """

    planner_model: str = field(
        default_factory=lambda: os.environ.get("PLANEXEC_PLANNER_MODEL", "openai:gpt-4.1"),
        metadata={"description": "Model that writes and revises plans (a strong one)."},
    )
    executor_model: str = field(
        default_factory=lambda: os.environ.get("PLANEXEC_EXECUTOR_MODEL", "openai:gpt-4.1-mini"),
        metadata={"description": "Model that carries out steps with no tool (a cheap one)."},
    )
    evaluator_model: str = field(
        default_factory=lambda: os.environ.get("PLANEXEC_EVALUATOR_MODEL", "openai:gpt-4.1-mini"),
        metadata={"description": "Model of the optional LLM judge."},
    )
    llm_judge: bool = field(
        default=False,
        metadata={"description": "Ask the evaluator model to judge results (one call a round)."},
    )
    approval: ApprovalPolicy = field(
        default="first",
        metadata={
            "description": "Which plans need human approval: always (every revision), first "
            "(the first plan, and revisions that add a side-effecting tool), never."
        },
    )
    workspace: str = field(
        default_factory=lambda: os.environ.get("PLANEXEC_WORKSPACE", "planexec-workspace"),
        metadata={"description": "Folder the tools may read and write; nothing outside it."},
    )
    max_steps: int = field(default=30, metadata={"description": "Most steps a plan may have."})
    max_plan_repairs: int = field(
        default=2, metadata={"description": "Times an invalid plan goes back to the planner."}
    )
    max_replans: int = field(default=2, metadata={"description": "Most plan revisions a run."})
    max_parallel_steps: int = field(
        default=4, metadata={"description": "Most steps running at the same time."}
    )
    step_timeout: float = field(
        default=120.0, metadata={"description": "Seconds one attempt of a step may take."}
    )
    step_max_attempts: int = field(
        default=3, metadata={"description": "Attempts of a step failing with transient errors."}
    )
    max_abandoned_calls: int = field(
        default=4,
        metadata={
            "description": "Tool calls that timed out but still run (abandoned) in this process "
            "at which no new tool call starts."
        },
    )
    retry_initial_interval: float = field(
        default=0.5, metadata={"description": "Seconds before the first retry of a step."}
    )
    retry_backoff_factor: float = field(
        default=2.0, metadata={"description": "Each retry waits this many times longer."}
    )
    max_executor_turns: int = field(
        default=6, metadata={"description": "Model turns of a step that has no tool."}
    )
    inline_output_limit: int = field(
        default=4096,
        metadata={"description": "Bytes of a step output kept in state; larger go to a file."},
    )


def context_of(runtime_context: Context | None) -> Context:
    """Return the run's context, or the defaults when the caller gave none."""
    return runtime_context if runtime_context is not None else Context()
