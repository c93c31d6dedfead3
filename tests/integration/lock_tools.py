"""A side effect we can count across processes, and the graph the lock tests' server serves.

``mark(label, seconds)`` appends ``start LABEL`` to the workspace's ``log.txt``, works for
some seconds, then appends ``end LABEL``: a step that really ran once leaves one ``end`` line.
"""

from __future__ import annotations

import time
from pathlib import Path

from langchain_core.tools import tool

from planexec import build_graph
from planexec.tools import ToolRegistry
from planexec.tools.workspace import current_workspace
from tests.helpers import plan_of, step


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool
def mark(label: str, seconds: float) -> dict:
    """Append 'start LABEL', work for some seconds, then append 'end LABEL' to log.txt."""
    log = current_workspace().resolve("log.txt")
    _append(log, f"start {label}")
    time.sleep(seconds)
    _append(log, f"end {label}")
    return {"label": label}


TOOLS = ToolRegistry([mark])

# Three steps one after another (0.3 s, 0.6 s, 0.3 s): a run holds its thread over a second.
PLAN = plan_of(
    step(1, "mark", {"label": "one", "seconds": 0.3}),
    step(2, "mark", {"label": "two", "seconds": 0.6}, [1]),
    step(3, "mark", {"label": "three", "seconds": 0.3}, [2]),
)
LABELS = ["one", "two", "three"]

# served by `langgraph dev` in the server tests, its workspace root from $PLANEXEC_WORKSPACE_ROOT
graph = build_graph(tools=TOOLS)


def log_lines(workspace: Path) -> list[str]:
    """The lines of the workspace's log.txt (none if it does not exist yet)."""
    log = workspace / "log.txt"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def ends(workspace: Path) -> dict[str, int]:
    """How many times each step's tool finished its side effect."""
    lines = log_lines(workspace)
    return {label: lines.count(f"end {label}") for label in LABELS}
