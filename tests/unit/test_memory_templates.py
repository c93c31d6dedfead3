"""Plan templates: a task's pattern matches tasks of its shape, in time linear in the task."""

from __future__ import annotations

import re
import time

import pytest

from planexec.memory.templates import filled, parameters, parametrized, pattern

COPY = {
    "goal": "g",
    "steps": [
        {"read_file": {"path": "note1.txt"}},
        {"write_file": {"path": "note2.txt", "content": "$1.content"}},
    ],
}


def test_a_pattern_matches_a_task_of_the_same_shape_and_fills_the_plan():
    task = "Copy note1.txt note2.txt"
    params = parameters(task, COPY)
    assert params == ["note1.txt", "note2.txt"]
    found = re.fullmatch(pattern(task, params), "copy a.txt  b.txt", re.IGNORECASE)
    assert found is not None
    plan = filled(parametrized(COPY, params), list(found.groups()))
    assert plan["steps"][0]["read_file"]["path"] == "a.txt"
    assert plan["steps"][1]["write_file"]["path"] == "b.txt"
    assert re.fullmatch(pattern(task, params), "Copy a.txtb.txt", re.IGNORECASE) is None


def test_files_columns_and_dates_of_a_task_become_parameters():
    task = "Report revenue of sales.csv from 2025-01-01 to 2025-03-31"
    plan = {
        "steps": [
            {"load_csv": {"path": "sales.csv"}},
            {"stats": {"value_column": "revenue", "start": "2025-01-01", "end": "2025-03-31"}},
        ]
    }
    params = parameters(task, plan)
    assert params == ["revenue", "sales.csv", "2025-01-01", "2025-03-31"]
    other = "Report profit of q3.csv from 2025-07-01 to 2025-09-30"
    found = re.fullmatch(pattern(task, params), other, re.IGNORECASE)
    assert found is not None
    template = parametrized(plan, params)
    assert "2025" not in str(template) and "sales.csv" not in str(template)
    assert filled(template, list(found.groups()))["steps"][1]["stats"] == {
        "value_column": "profit",
        "start": "2025-07-01",
        "end": "2025-09-30",
    }


@pytest.mark.parametrize(
    "hostile", ["Copy " + "x" * 20_000 + "!", "Copy " + "x " * 10_000 + "!", "x" * 20_000]
)
def test_matching_a_hostile_task_takes_linear_time(hostile):
    """Two parameters side by side were joined by optional spaces: a 20,000-character task
    of word characters took 6 s against one template (quadratic backtracking)."""
    task = "Copy note1.txt note2.txt"
    compiled = re.compile(pattern(task, parameters(task, COPY)), re.IGNORECASE)
    started = time.perf_counter()
    assert compiled.fullmatch(hostile) is None
    assert time.perf_counter() - started < 0.5  # linear: about a millisecond


def test_recall_of_a_long_task_against_many_templates_stays_fast():
    """Even a pattern that backtracks (parameters joined by a dash) meets only short tasks."""
    from langgraph.store.memory import InMemoryStore

    from planexec.memory import PlanMemory

    memory = PlanMemory(InMemoryStore())
    plan = {
        "goal": "g",
        "steps": [{"read_file": {"path": "q1.csv"}}, {"read_file": {"path": "q2.csv"}}],
    }
    for i in range(50):
        memory.remember(f"Compare q1.csv-q2.csv run {i}", plan, run=str(i))
    started = time.perf_counter()
    assert memory.recall("Compare " + "a-" * 10_000 + "!") is None
    assert time.perf_counter() - started < 2.0
