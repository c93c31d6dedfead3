"""planexec: turn a goal into an explicit, human-approved plan and run it with LangGraph.

Names load on first use (PEP 562), so ``import planexec`` and ``planexec --help`` are fast:
building the graph loads LangGraph, LangChain and pandas only when something needs them.
``__all__`` is the public API; everything else is reachable but internal.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("planexec")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_WHERE = {
    "ConfigurationError": "planexec.errors",
    "Context": "planexec.context",
    "Plan": "planexec.plan",
    "PlanValidationError": "planexec.plan",
    "PlanexecError": "planexec.errors",
    "PlanexecSummary": "planexec.state",
    "Recording": "planexec.recording",
    "RunError": "planexec.runs",
    "RunRequest": "planexec.runs",
    "RunResult": "planexec.runs",
    "Runs": "planexec.runs",
    "Sandbox": "planexec.tools.sandbox",
    "SandboxError": "planexec.tools.sandbox",
    "Step": "planexec.plan",
    "ThreadState": "planexec.runs",
    "ToolRegistry": "planexec.tools",
    "Workspace": "planexec.tools",
    "aopen_saver": "planexec.runs",
    "as_tool": "planexec.embedding",
    "build_graph": "planexec.graph",
    "default_registry": "planexec.tools",
    "new_run": "planexec.runs",
    "open_saver": "planexec.runs",
    "stop_speculating": "planexec.execution.answers",
    "use_workspace": "planexec.tools",
    "validate_plan": "planexec.plan",
}

__all__ = [
    "ConfigurationError",
    "Context",
    "Plan",
    "PlanValidationError",
    "PlanexecError",
    "PlanexecSummary",
    "Recording",
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
    "__version__",
    "aopen_saver",
    "as_tool",
    "build_graph",
    "default_registry",
    "new_run",
    "open_saver",
    "stop_speculating",
    "use_workspace",
    "validate_plan",
]

if TYPE_CHECKING:
    from planexec.context import Context
    from planexec.embedding import as_tool
    from planexec.errors import ConfigurationError, PlanexecError
    from planexec.execution.answers import stop_speculating
    from planexec.graph import build_graph
    from planexec.plan import Plan, PlanValidationError, Step, validate_plan
    from planexec.recording import Recording
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
    from planexec.state import PlanexecSummary
    from planexec.tools import ToolRegistry, Workspace, default_registry, use_workspace
    from planexec.tools.sandbox import Sandbox, SandboxError


def __getattr__(name: str) -> Any:
    """Import a public name from its module the first time it is used."""
    if name not in _WHERE:
        raise AttributeError(f"module 'planexec' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the public names (loaded or not)."""
    return sorted(set(globals()) | set(_WHERE))
