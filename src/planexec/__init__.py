"""planexec: turn a goal into an explicit, human-approved plan and run it with LangGraph."""

from planexec.context import Context
from planexec.errors import ConfigurationError, PlanexecError
from planexec.graph import build_graph
from planexec.plan import Plan, PlanValidationError, Step, validate_plan
from planexec.runs import (
    RunError,
    RunRequest,
    RunResult,
    Runs,
    ThreadState,
    aopen_saver,
    new_run,
    open_saver,
)
from planexec.sandbox import Sandbox, SandboxError
from planexec.tools import ToolRegistry, Workspace, default_registry, use_workspace

__all__ = [
    "ConfigurationError",
    "Context",
    "Plan",
    "PlanValidationError",
    "PlanexecError",
    "RunError",
    "RunRequest",
    "RunResult",
    "Runs",
    "Sandbox",
    "SandboxError",
    "Step",
    "ThreadState",
    "ToolRegistry",
    "Workspace",
    "aopen_saver",
    "build_graph",
    "default_registry",
    "new_run",
    "open_saver",
    "use_workspace",
    "validate_plan",
]
