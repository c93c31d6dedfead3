"""What an MCP tool's annotations (and the operator's overrides) make of it in planexec.

MCP's annotations are hints: a server's word, not a guarantee. planexec reads them this way
(the MCP spec's defaults fill what a server leaves out: not read-only, destructive, not
idempotent, open world):

* read-only (``readOnlyHint``) → not side-effecting: the ``first`` approval policy lets a
  revision add it without asking;
* anything else (destructive, unannotated, or writing without destroying) → side-effecting,
  named at approval with why (``destructive per the server's hint``, ``no hints: may write
  or delete``...);
* ``idempotentHint`` → a timed-out call may be retried; without it, never;
* ``openWorldHint`` false → it stays inside (with ``readOnlyHint``, it may run while its plan
  awaits approval); absent or true → it may reach outside.

The operator's overrides (:class:`~planexec.tools.mcp.config.ToolHints`) replace the server's
hints they name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from planexec.concurrency.toolcalls import RETRY_ON_TIMEOUT
from planexec.tools.mcp.config import ToolHints

SIDE_EFFECTS = "side_effects"
"""The registry's side-effects key (:data:`planexec.tools.registry.SIDE_EFFECTS`)."""
OPEN_WORLD = "open_world"
"""The registry's open-world key (:data:`planexec.tools.registry.OPEN_WORLD`)."""
MCP_KEY = "mcp"
"""The registry's key of an MCP tool's server, hints and why it has side effects
(:data:`planexec.tools.registry.MCP_KEY`)."""

ADAPTERS = "langchain-mcp-adapters"
"""``metadata["mcp"]["via"]`` of a tool made by those adapters
(:data:`planexec.tools.registry.ADAPTERS`)."""

HINT_FIELDS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}
MAX_NAME = 64
"""OpenAI's limit on a tool's name (``^[a-zA-Z0-9_-]{1,64}$``)."""


def tool_name(prefix: str, name: str) -> str:
    """Return a planexec name for a server's tool: ``prefix__name``, legal for every provider.

    Characters other than letters, digits, ``_`` and ``-`` become ``_``, and then the name
    ends with a short hash of the whole (``a.b`` and ``a_b`` stay apart); a name past 64
    characters is cut and ends with that hash too.
    """
    whole = f"{prefix}__{name}" if prefix else name
    legal = re.sub(r"[^A-Za-z0-9_-]", "_", whole) or "_"
    if legal == whole and len(legal) <= MAX_NAME:
        return legal
    digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
    return f"{legal[: MAX_NAME - 9]}_{digest}"


def marks(
    server: str,
    tool: str,
    annotations: Mapping[str, Any] | None,
    overrides: Mapping[str, ToolHints],
) -> dict[str, Any]:
    """Return the metadata planexec gives an MCP tool from its hints and the operator's word.

    ``annotations`` are the tool's MCP annotations (``readOnlyHint``...; None: it has none);
    ``overrides`` the server's ``planexec.tools`` (``"*"`` for every tool, then the tool's own).
    """
    given = {
        k: v
        for k, v in (annotations or {}).items()
        if k in HINT_FIELDS.values() and isinstance(v, bool)
    }
    hints: dict[str, bool | None] = {
        field: _flag(given.get(key)) for field, key in HINT_FIELDS.items()
    }
    overridden: list[str] = []
    for layer in (overrides.get("*"), overrides.get(tool)):
        if layer is None:
            continue
        for field, value in layer.model_dump(exclude_none=True).items():
            hints[field] = value
            overridden.append(field)
    read_only = hints["read_only"] is True
    destructive = hints["destructive"] is not False  # the spec's default: destructive
    by = "per the operator" if overridden else "per the server's hint"
    if read_only:
        why = None
    elif not given and not overridden:
        why = "no hints: may write or delete"
    elif destructive:
        why = f"destructive {by}"
    else:
        why = f"writes, not destructive, {by}"
    return {
        SIDE_EFFECTS: not read_only,
        OPEN_WORLD: hints["open_world"] is not False,  # the spec's default: open world
        RETRY_ON_TIMEOUT: hints["idempotent"] is True,
        MCP_KEY: {
            "server": server,
            "tool": tool,
            "hints": {HINT_FIELDS[k]: v for k, v in hints.items() if v is not None},
            "overridden": sorted(set(overridden)),
            "why": why,
        },
    }


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


MAX_ERROR = 2000
"""Characters of a server's error message kept in the step's error."""


def cut(text: str) -> str:
    """Return a server's message stripped and cut to :data:`MAX_ERROR` characters."""
    text = text.strip()
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 1] + "…"
