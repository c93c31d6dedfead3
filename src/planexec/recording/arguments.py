"""A tool call's arguments as a recording keys them: typed JSON, every change to keep them marked.

A call is kept with its arguments as planexec can store them (:func:`to_storable`) with every
secret replaced (:func:`redact`). Both change some values: a huge integer becomes its text, a
NUL becomes U+FFFD, NaN becomes null, a secret becomes ``[redacted]``. So the argument paths
whose value was changed (:func:`changed_paths`) are part of the key: a call whose argument was
changed never matches a call whose argument is, literally, what it was changed into (``2**70``
and ``"1180591620717411303424"``, a secret and the text ``"[redacted]"``), while the same call
(the same NaN, the same secret, or a rotated one) still does.

Arguments are compared as canonical JSON, types included: ``True``, ``1`` and ``1.0`` are
three calls; a tuple and a list are the same JSON, one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planexec.recording.files import canonical, digest, safe_name, sorted_json
from planexec.redaction.secrets import redact
from planexec.storage.storable import to_storable


@dataclass(frozen=True)
class ToolCall:
    """One tool call as recorded: its tool, its arguments (scrubbed), what was changed, its file."""

    tool: str
    args: dict[str, Any]
    changed: list[str]
    """The argument paths (``v``, ``rows[0].name``) changed to be kept, sorted."""
    path: Path

    def same(self, args: dict[str, Any], changed: list[str]) -> bool:
        """Say whether recorded ``args`` (and their changed paths) are this very call's."""
        return canonical(args) == canonical(self.args) and sorted(changed) == self.changed


def tool_call(folder: Path, tool: str, args: dict[str, Any], secrets: list[str]) -> ToolCall:
    """Return a call of ``tool`` as a recording in ``folder`` keys it (secrets longest first)."""
    name = str(redact(tool, secrets))
    stored = to_storable(args)
    scrubbed = redact(stored, secrets)
    paths = changed_paths(args, stored) + changed_paths(stored, scrubbed)
    changed = sorted(set(redact(paths, secrets)))  # a path may name a secret key
    shown = sorted_json(scrubbed)
    material: dict[str, Any] = {"tool": name, "args": shown}
    if changed:
        material["changed"] = changed
    key = digest(material)
    return ToolCall(name, shown, changed, folder / "steps" / safe_name(name) / f"{key}.json")


def changed_paths(before: Any, after: Any, at: str = "") -> list[str]:
    """Return the paths where ``after`` is not, as typed JSON, the value ``before`` was."""
    if isinstance(before, dict) and isinstance(after, dict):
        if list(before) != list(after):  # a key changed (not text, or a secret)
            return [at or "(arguments)"]
        return [p for k in before for p in changed_paths(before[k], after[k], _key(at, k))]
    if isinstance(before, list | tuple) and isinstance(after, list):
        if len(before) != len(after):
            return [at or "(arguments)"]
        return [
            p for i, (b, a) in enumerate(zip(before, after, strict=True))
            for p in changed_paths(b, a, f"{at}[{i}]")
        ]  # fmt: skip
    if type(before) is type(after) and isinstance(before, str | int | float | bool | None):
        return [] if before == after else [at or "(arguments)"]  # NaN != NaN: changed
    return [at or "(arguments)"]


def _key(at: str, key: object) -> str:
    return f"{at}.{key}" if at else str(key)
