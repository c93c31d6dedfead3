"""Property tests of the validation boundary: any input is a valid plan or a list of errors."""

from __future__ import annotations

import json
from graphlib import TopologicalSorter

from hypothesis import HealthCheck, given, settings

from planexec.plan import Plan, PlanValidationError, validate_plan
from planexec.plan.references import iter_references
from planexec.review.decisions import (
    AnswerRefused,
    Approve,
    Cancel,
    Edit,
    Reject,
    read_decision,
)
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, sleep_for
from tests.strategies import (
    examples,
    plans,
    resume_answers,
    valid_plans,
    valid_plans_with_step_tools,
)

TOOLS = ToolRegistry([echo, sleep_for, always_fails])
SETTINGS = settings(
    max_examples=examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def check_invariants(plan: Plan) -> None:
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids)) and 1 <= len(ids) <= 30
    for s in plan.steps:
        assert s.tool is None or s.tool in TOOLS
        assert not s.tools or s.tool is None  # only a tool-less step lists tools
        assert len(set(s.tools)) == len(s.tools) and all(t in TOOLS for t in s.tools)
        assert s.id not in s.depends_on and set(s.depends_on) <= set(ids)
        assert {ref for ref, _ in iter_references(s.args)} <= set(s.depends_on)
    tuple(TopologicalSorter({s.id: s.depends_on for s in plan.steps}).static_order())
    json.dumps(plan.model_dump(), allow_nan=False)


@SETTINGS
@given(plans)
def test_any_input_is_a_valid_plan_or_readable_errors(data):
    try:
        plan = validate_plan(data, TOOLS, max_steps=30)
    except PlanValidationError as exc:
        assert exc.errors and all(isinstance(e, str) and e for e in exc.errors)
    else:
        check_invariants(plan)


@settings(max_examples=examples(500), deadline=None)
@given(valid_plans)
def test_well_formed_plans_are_accepted(data):
    check_invariants(validate_plan(data, TOOLS, max_steps=30))


@settings(max_examples=examples(200), deadline=None)
@given(valid_plans_with_step_tools)
def test_tool_less_steps_listing_registered_tools_are_accepted_as_listed(data):
    plan = validate_plan(data, TOOLS, max_steps=30)
    check_invariants(plan)
    assert [s.tools for s in plan.steps] == [s.get("tools", []) for s in data["steps"]]


@SETTINGS
@given(resume_answers)
def test_any_resume_answer_is_a_decision_or_a_refusal_saying_why(answer):
    try:
        decision = read_decision(answer)
    except AnswerRefused as exc:
        assert str(exc).startswith("answer not understood (")
        return
    # accepted: planexec's own answer, or a HITL answer that reads as one
    own = answer if isinstance(answer, dict) and "action" in answer else None
    if own is not None:
        assert decision.action == own["action"]
    assert isinstance(decision, Approve | Edit | Reject | Cancel)
