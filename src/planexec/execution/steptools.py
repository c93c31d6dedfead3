"""Tools are approved per step: what a tool-less step's executor model may call.

A step with a tool calls exactly that tool; no model is involved. A step with
``"tool": null`` is done by the executor model, bound to exactly the tools its step lists
(``"tools"``, shown at approval; none by default). A call to any other tool, whoever asked
for it (a CSV cell, a tool's output, the model itself), is refused: it is not run, the
model is told so, a ``tool_call_refused`` event is streamed, and the call is kept in the
step's record (``refused_calls``) for the reviewer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool

from planexec.errors import ToolError
from planexec.plan.doc import step_tools
from planexec.redaction.secrets import redact
from planexec.state import RefusedCall, StepDoc
from planexec.storage.storable import to_storable
from planexec.tools.registry import ToolRegistry

MAX_REFUSALS_KEPT = 20
"""Refused calls kept in a step's record; every refusal is also streamed as an event."""
MAX_ARGS_CHARS = 500
MAX_NAME_CHARS = 100
REFUSED = "not a tool of this step"


def allowed_tools(step: StepDoc, registry: ToolRegistry) -> dict[str, BaseTool]:
    """Return the tools a tool-less step's model may call: exactly those its step lists.

    Raises ``ToolError`` when the step lists a tool this process has not registered (a plan
    approved where more tools were registered): the step fails, nothing else is offered.
    """
    allowed: dict[str, BaseTool] = {}
    for name in step_tools(step):
        if name not in registry:
            raise ToolError(f"the step lists tool {name!r}, which is not registered here")
        allowed[name] = registry.get(name)
    return allowed


@dataclass
class Refusals:
    """The calls one step's model made to tools its step does not list (across attempts)."""

    step_id: int
    notify: Callable[[dict[str, Any]], None]
    """Streams an event (the step's writer, which also redacts)."""
    secrets: list[str]
    attempt: int = 1
    kept: list[RefusedCall] = field(default_factory=list)
    total: int = 0

    def refuse(self, name: Any, args: Any, allowed: list[str]) -> str:
        """Record a refused call, stream its event, and return the message for the model."""
        tool = _cut(redact(to_storable(str(name)), self.secrets), MAX_NAME_CHARS)
        shown = _cut(redact(_args_text(args), self.secrets), MAX_ARGS_CHARS)
        reason = REFUSED
        self.total += 1
        if len(self.kept) < MAX_REFUSALS_KEPT:
            self.kept.append(
                RefusedCall(tool=tool, args=shown, reason=reason, attempt=self.attempt)
            )
        self.notify(
            {
                "event": "tool_call_refused",
                "step": self.step_id,
                "tool": tool,
                "args": shown,
                "allowed": allowed,
                "attempt": self.attempt,
            }
        )
        may = ", ".join(allowed) or "no tools"
        return f"error: {tool!r} is {reason}; not run. This step may call: {may}."


def _args_text(args: Any) -> str:
    """Return the arguments as JSON text (non-ASCII escaped, so always storable)."""
    try:
        return json.dumps(args, default=str)
    except (TypeError, ValueError, RecursionError):
        return "(arguments that are not JSON data)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
