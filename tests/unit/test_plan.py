from __future__ import annotations

import pytest

from planexec.plan import PlanValidationError, validate_plan
from planexec.plan.doc import topological_order
from planexec.plan.references import UnresolvedReferenceError, resolve_references
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, sleep_for, step


@pytest.fixture
def tools() -> ToolRegistry:
    return ToolRegistry([echo, sleep_for, always_fails])


def errors_of(data, tools, **kw) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        validate_plan(data, tools, max_steps=kw.pop("max_steps", 10), **kw)
    return info.value.errors


def test_a_valid_plan_parses(tools):
    plan = validate_plan(
        plan_of(step(1, "echo", {"text": "hi"}), step(2, "echo", {"text": "$1"}, [1])),
        tools,
        max_steps=10,
    )
    assert [s.id for s in plan.steps] == [1, 2]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([step(1, "nope")], "unknown tool 'nope'"),
        ([step(1, "echo", {"text": "a"}), step(1, "echo", {"text": "b"})], "duplicate step id 1"),
        ([step(1, "echo", {"text": "a"}, [1])], "depends on itself"),
        ([step(1, "echo", {"text": "a"}, [7])], "unknown step 7"),
        (
            [step(1, "echo", {"text": "a"}, [2]), step(2, "echo", {"text": "b"}, [1])],
            "dependency cycle",
        ),
        ([step(1, "echo", {"text": "a"}), step(2, "echo", {"text": "$3"})], "no step 3"),
        ([step(1, "echo", {"txt": "a"})], "has no argument 'txt'"),
        ([step(1, "echo", {})], "text: Field required"),
        ([step(1, "sleep_for", {"seconds": "soon"})], "seconds"),
    ],
)
def test_invalid_plans_are_explained(tools, steps, expected):
    assert any(expected in e for e in errors_of(plan_of(*steps), tools)), errors_of(
        plan_of(*steps), tools
    )


def test_too_many_steps(tools):
    steps = [step(i, "echo", {"text": "x"}) for i in range(1, 6)]
    assert any("at most 3" in e for e in errors_of(plan_of(*steps), tools, max_steps=3))


def test_malformed_json_and_missing_fields(tools):
    assert "not valid JSON" in errors_of("{not json", tools)[0]
    errs = errors_of({"steps": [{"id": "x"}]}, tools)
    assert any(e.startswith("goal") for e in errs)
    assert any("steps.0.id" in e for e in errs)


def test_a_referenced_argument_is_checked_at_run_time_only(tools):
    """sleep_for returns dict[str, Any]: any field, of any type, until it runs."""
    plan = plan_of(
        step(1, "sleep_for", {"seconds": 0}), step(2, "sleep_for", {"seconds": "$1.n"}, [1])
    )
    validate_plan(plan, tools, max_steps=10)


def test_a_field_of_a_tool_that_returns_text_is_refused(tools):
    plan = plan_of(step(1, "echo", {"text": "1"}), step(2, "sleep_for", {"seconds": "$1.n"}, [1]))
    with pytest.raises(PlanValidationError, match=r"\$1\.n does not exist: cannot take 'n'"):
        validate_plan(plan, tools, max_steps=10)


def test_kept_steps_may_be_depended_on(tools):
    validate_plan(plan_of(step(5, "echo", {"text": "$2"}, [2])), tools, max_steps=10, kept={2})


def test_references_resolve_whole_values_fields_and_text():
    outputs = {1: {"path": "a.csv", "rows": [10, 20]}, 2: "hello"}
    assert resolve_references("$1", outputs) == outputs[1]
    assert resolve_references("$1.rows.1", outputs) == 20
    assert resolve_references({"x": ["file $1.path and ${2}", "$$5"]}, outputs) == {
        "x": ["file a.csv and hello", "$5"]
    }
    with pytest.raises(UnresolvedReferenceError, match="no field 'nope'"):
        resolve_references("$1.nope", outputs)


def test_topological_order_keeps_plan_order_among_ready_steps():
    steps = [step(3, None, deps=[2]), step(1, None), step(2, None, deps=[1]), step(4, None)]
    assert [s["id"] for s in topological_order(steps)] == [1, 4, 2, 3]


def test_a_node_without_a_plan_gets_a_clear_error_not_an_assert():
    import pytest

    from planexec.errors import PlanexecError
    from planexec.plan.doc import NoPlanError, plan_of

    with pytest.raises(NoPlanError, match="this thread has no plan") as info:
        plan_of({"plan": None})  # type: ignore[typeddict-item]
    assert isinstance(info.value, PlanexecError)


def test_a_step_id_a_checkpoint_cannot_store_is_invalid():
    import pytest

    from planexec.plan import PlanValidationError, validate_plan
    from planexec.tools import ToolRegistry
    from tests.helpers import echo

    for bad in (2**70, str(2**70)):
        plan = {
            "goal": "g",
            "steps": [{"id": bad, "tool": "echo", "args": {"text": "x"}, "description": "d"}],
        }
        with pytest.raises(PlanValidationError, match="less than or equal to"):
            validate_plan(plan, ToolRegistry([echo]), max_steps=5)
