"""How a run ended: status, wall time, model calls and tokens, answer, files, and what next."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from planexec.cli.ui import styled


def usage_line(usage: Mapping[str, Any]) -> str:
    """Return ``N model calls (planner 1, executor 2) · T tokens (I in, O out)``."""
    roles = {role: use for role, use in usage.items() if isinstance(use, Mapping)}
    calls = sum(int(use.get("calls", 0)) for use in roles.values())
    tokens_in = sum(int(use.get("input_tokens", 0)) for use in roles.values())
    tokens_out = sum(int(use.get("output_tokens", 0)) for use in roles.values())
    by_role = ", ".join(f"{role} {int(use.get('calls', 0))}" for role, use in roles.items())
    if not calls:
        return "no model calls"
    line = f"{calls} model call{'' if calls == 1 else 's'} ({by_role})"
    return line + f" · {tokens_in + tokens_out:,} tokens ({tokens_in:,} in, {tokens_out:,} out)"


def print_answer(out: Console, values: Mapping[str, Any], workspace: str) -> None:
    """Print a run's final answer and the files it made (paths in the workspace)."""
    final = values.get("final") or {}
    if final.get("answer"):
        out.print(str(final["answer"]))
    for artifact in final.get("artifacts", []):
        out.print(styled("  → ", str(Path(workspace, str(artifact)))))


def print_outcome(
    out: Console,
    values: Mapping[str, Any],
    thread_id: str,
    workspace: str,
    wall: float | None = None,
    waited: float = 0.0,
) -> None:
    """Print the end of a run: status and costs, the answer and files, and how to see it again.

    ``wall``: seconds the command took, ``waited`` of them at the approval prompt.
    """
    final = values.get("final") or {}
    status = str(final.get("status", "unfinished"))
    took = f" in {wall:.1f}s" if wall is not None else ""
    took += f" ({waited:.1f}s of it at the prompt)" if took and waited >= 0.05 else ""
    style = "green" if status == "succeeded" else "red"
    out.print()
    out.print(
        styled((status, f"bold {style}"), f"{took} · {usage_line(values.get('usage') or {})}")
    )
    print_answer(out, values, workspace)
    out.print(styled(("see it again: ", "dim"), f"planexec show {thread_id}"))
