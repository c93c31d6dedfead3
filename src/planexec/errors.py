"""Exceptions planexec raises, each with a message meant for a person to read.

Every planexec error is a ``ValueError``: the LangGraph API server (and so Studio and the SDK)
shows the message of ValueError-family errors and hides every other one behind "An internal
error occurred".
"""

from __future__ import annotations


class PlanexecError(ValueError):
    """Base class for errors planexec reports to its users."""


class ConfigurationError(PlanexecError):
    """A setting is missing or wrong (an API key, a model name, a path)."""


class ToolError(PlanexecError):
    """A tool refused its input; the message says why. Not retried."""


class TransientToolError(PlanexecError):
    """A tool failed in a way that may pass on its own (network, busy resource). Retried."""


class WorkspaceError(ToolError):
    """A path is outside the run's workspace, or is not a regular file or folder."""


class PlanNotApprovedError(PlanexecError):
    """The plan in state is not the approved one (changed after approval, or never approved).

    The executor records it and sends the plan back to approval; nothing runs.
    """
