"""A tool that writes with a bare relative path misses its workspace: the evaluator says how."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.tools import ToolRegistry, current_workspace
from tests.helpers import plan_of, plan_reply, scripted, step, thread


def save_naively(filename: str, text: str) -> dict[str, str]:
    """Write text to a file (the way a newcomer writes it: into the process's folder)."""
    Path(filename).write_text(text)
    return {"path": filename}


def save_in_workspace(filename: str, text: str) -> dict[str, str]:
    """Write text to a file of the run's workspace."""
    current_workspace().write_bytes(filename, text.encode())
    return {"path": filename}


def _run(tool: Any, tmp_path: Path) -> dict[str, Any]:
    registry = ToolRegistry()
    registry.register(tool, side_effects=True, file_fields=["path"])
    plan = plan_of(step(1, tool.__name__, {"filename": "portfolio.txt", "text": "3956.25"}))
    graph = build_graph(
        InMemorySaver(),
        tools=registry,
        workspace_root=tmp_path / "root",
        models={"planner": scripted(plan_reply(plan)), "executor": scripted()},
    )
    config, ctx = thread(), Context(max_replans=0, step_max_attempts=1)
    graph.invoke({"task": "Save my portfolio's worth"}, config, context=ctx)
    return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)


def test_a_file_written_outside_the_workspace_fails_with_the_way_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = _run(save_naively, tmp_path)
    reason = out["steps"]["1"]["error"]
    assert reason in out["final"]["answer"]
    assert "'portfolio.txt', which does not exist in the workspace" in reason
    assert "current_workspace()" in reason
    assert str(tmp_path) not in reason  # no server path reaches a model prompt


def test_a_file_written_through_current_workspace_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = _run(save_in_workspace, tmp_path)
    assert out["final"]["status"] == "succeeded"
    assert not (tmp_path / "portfolio.txt").exists()
