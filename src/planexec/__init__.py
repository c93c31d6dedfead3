"""planexec: turn a goal into an explicit, human-approved plan and run it with LangGraph."""

from planexec.context import Context
from planexec.errors import ConfigurationError, PlanexecError
from planexec.graph import build_graph
from planexec.plan import Plan, PlanValidationError, Step, validate_plan
from planexec.sandbox import Sandbox, SandboxError
from planexec.tools import ToolRegistry, Workspace, default_registry, use_workspace

__all__ = [
    "ConfigurationError",
    "Context",
    "Plan",
    "PlanValidationError",
    "PlanexecError",
    "Sandbox",
    "SandboxError",
    "Step",
    "ToolRegistry",
    "Workspace",
    "build_graph",
    "default_registry",
    "use_workspace",
    "validate_plan",
]
