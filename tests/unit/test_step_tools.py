"""Validation of a step's ``tools`` list, and which tools a step or a plan may call."""

from __future__ import annotations

import pytest

from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.doc import plan_tools, step_tools
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, sleep_for, step


@pytest.fixture
def tools() -> ToolRegistry:
    return ToolRegistry([echo, sleep_for, always_fails])


def errors_of(data, tools) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        validate_plan(data, tools, max_steps=10)
    return info.value.errors


def test_tools_default_to_none_and_are_kept_in_the_plan_artifact(tools):
    plan = validate_plan(
        plan_of(step(1, "echo", {"text": "a"}), {**step(2, None, {}, [1]), "tools": ["echo"]}),
        tools,
        max_steps=10,
    )
    doc = to_doc(plan, version=1)
    assert [s["tools"] for s in doc["steps"]] == [[], ["echo"]]
    assert [step_tools(s) for s in doc["steps"]] == [["echo"], ["echo"]]


@pytest.mark.parametrize(
    ("listed", "tool_name", "expected"),
    [
        (["nope"], None, "step 1: unknown tool 'nope' in tools (available: "),
        (["echo", "echo"], None, "step 1: tool 'echo' is listed twice in tools"),
        (["echo"], "echo", "only a step with no tool may list tools"),
        (["Plan"], None, "unknown tool 'Plan' in tools"),
        ("echo", None, "tools: Input should be a valid list"),
        ([3], None, "tools.0: Input should be a valid string"),
    ],
)
def test_invalid_tool_lists_are_explained(tools, listed, tool_name, expected):
    data = plan_of({**step(1, tool_name, {"text": "a"} if tool_name else {}), "tools": listed})
    errors = errors_of(data, tools)
    assert any(expected in e for e in errors), errors


def test_a_null_tool_list_is_read_as_none_listed(tools):
    """Models write ``null`` for an optional field: the same as leaving it out."""
    plan = validate_plan(plan_of({**step(1, None, {}), "tools": None}), tools, max_steps=10)
    assert plan.steps[0].tools == []


def test_step_tools_of_a_stored_step_without_the_field_is_none():
    """Plans stored before the field existed: a tool-less step may call nothing."""
    old = {k: v for k, v in step(1, None).items() if k != "tools"}
    assert step_tools(old) == []  # type: ignore[arg-type]


def test_plan_tools_counts_tool_steps_and_listed_tools():
    doc = plan_of(
        step(1, "echo", {"text": "a"}),
        {**step(2, None, {}, [1]), "tools": ["write_file", "echo"]},
        step(3, None, {}),
    )
    assert plan_tools(doc) == ["echo", "write_file"]  # type: ignore[arg-type]
