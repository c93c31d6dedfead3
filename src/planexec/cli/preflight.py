"""Before a given plan runs: the files it reads must be in its workspace (else say which)."""

from __future__ import annotations

import shlex
from pathlib import Path, PurePath

from planexec.state import PlanDoc
from planexec.tools import ToolRegistry

INPUT_ARGS = frozenset({"path", "dataset", "file", "filename", "input_path", "source"})
"""Argument names that name a file a step reads."""


def missing_inputs(plan: PlanDoc, root: Path, tools: ToolRegistry) -> list[tuple[int, str]]:
    """Return ``(step, file)`` for each file a read-only step names that is not in ``root``.

    Files a side-effecting step of the plan names (and so may write) are not asked for, nor
    values made from other steps' outputs (``$N``).
    """
    written: set[str] = set()
    missing: list[tuple[int, str]] = []
    for step in plan["steps"]:
        named = {
            key: value
            for key, value in step["args"].items()
            if isinstance(value, str) and value and "$" not in value
        }
        if step["tool"] is None:
            continue
        if tools.has_side_effects(step["tool"]):
            written.update(named.values())
            continue
        for key, value in named.items():
            if key in INPUT_ARGS and value not in written and not _present(root, value):
                missing.append((step["id"], value))
    return missing


def missing_message(missing: list[tuple[int, str]], root: Path) -> str:
    """Say which files the plan reads that the workspace lacks, and how to put them there.

    ``--data`` copies a file to the workspace's top folder, so a name in a subfolder is told
    where to go instead; names are shell-quoted, so the advice works when pasted.
    """
    files = sorted({name for _, name in missing})
    where = ", ".join(f"{name} (step {sid})" for sid, name in missing)
    top = [name for name in files if PurePath(name).name == name]
    advice = [f"put {name} at {root / name}" for name in files if name not in top]
    if top:
        data = " ".join(f"--data {shlex.quote(name)}" for name in top)
        advice.insert(0, f"copy them in with {data} (each file its own --data)")
    return (
        f"the plan reads {where}, not in its workspace {root}: {'; '.join(advice)}, "
        "or give --workspace a folder that has them"
    )


def _present(root: Path, name: str) -> bool:
    try:
        return (root / name).exists()
    except (OSError, ValueError):  # a name no file can have: the step's own check says so
        return True
