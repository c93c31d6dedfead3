"""Money in text is not a step reference (issue 33).

``"Total: $1,250.00"`` in step 1 was read as a reference to step 1 ("step 1 depends on
itself"), ``"costs $5"`` as one to a step 5. The rule (plan/references.py):

- ``"$N"`` or ``"$N.path"`` as a whole argument value is a reference (a whole amount such as
  ``"$5.00"`` is not);
- in text, ``${N}`` / ``${N.path}`` and ``$N.field`` (a field name after the dot) are
  references; a bare ``$N`` is text, in any step, whatever the step depends on;
- ``$$`` is a literal ``$`` everywhere: ``"$$3"`` reaches the tool as ``$3``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.plan import Plan, PlanValidationError, validate_plan
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

SEEN: list[str] = []


@tool
def note(text: str) -> str:
    """Keep a note and return it."""
    SEEN.append(text)
    return text


@tool
def price() -> str:
    """Today's price."""
    return "12.50"


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(note, side_effects=False)
    tools.register(price, side_effects=False)
    tools.register(echo, side_effects=False)
    return tools


MONEY = ["Total: $1,250.00", "$1,250.00", "costs $5", "$5 off", "$1.99 each", "$1,25 (EUR style)"]


@pytest.mark.parametrize("text", MONEY)
def test_money_in_the_first_step_is_text(text):
    plan = Plan.model_validate(plan_of(step(1, "note", {"text": text})))
    assert plan.steps[0].depends_on == []
    validate_plan(plan_of(step(1, "note", {"text": text})), registry(), max_steps=5)


@pytest.mark.parametrize(
    "text", ["costs $5", "$9 off", "Total: $1,250.00", "$2.50 each", "$2.00", "$0 down", "$2"]
)
def test_money_in_any_later_step_is_text(text):
    """The hostile case: a bare $N in text stays text even after step N, and even in a step
    that depends on it (a whole "$2" is a reference: see below)."""
    steps = [step(i, "price") for i in range(1, 6)]
    plan = validate_plan(
        plan_of(*steps, step(6, "note", {"text": f"Your order: {text}"}, [5])),
        registry(),
        max_steps=9,
    )
    assert plan.steps[5].depends_on == [5]


@pytest.mark.parametrize(
    ("text", "depends_on"),
    [("got ${1}", [1]), ("${1} again", [1]), ("mean ${1}, when ${2}", [1, 2]), ("n=${1}", [1])],
)
def test_references_in_text_are_braced_or_name_a_field(text, depends_on):
    steps = [step(1, "price"), step(2, "price"), step(3, "note", {"text": text})]
    plan = validate_plan(plan_of(*steps), registry(), max_steps=5)
    assert plan.steps[2].depends_on == depends_on


def test_whole_values_and_fields_in_text_are_references_whatever_the_step():
    with pytest.raises(PlanValidationError, match=r"refers to \$3, but there is no step 3"):
        validate_plan(plan_of(step(1, "note", {"text": "$3"})), registry(), max_steps=5)
    with pytest.raises(PlanValidationError, match=r"refers to \$4, but there is no step 4"):
        validate_plan(plan_of(step(1, "note", {"text": "see $4.path"})), registry(), max_steps=5)
    with pytest.raises(PlanValidationError, match="depends on itself"):
        validate_plan(plan_of(step(1, "note", {"text": "$1"})), registry(), max_steps=5)


def test_the_planner_path_takes_money_in_a_compact_plan():
    compact = {"steps": [{"note": "Total: $1,250.00"}, {"note": "costs $5, then $$1 off"}]}
    plan = validate_plan(compact, registry(), max_steps=5, goal="notes")
    assert [s.depends_on for s in plan.steps] == [[], []]


def run(use_models: Any, ctx: Any, plan: dict[str, Any]) -> dict[str, Any]:
    use_models(planner=scripted(plan_reply(plan)), executor=scripted())
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    config, run_ctx = thread(), ctx()
    graph.invoke({"task": "Write the totals"}, config, context=run_ctx)
    return graph.invoke(Command(resume="approve"), config, context=run_ctx)


def test_amounts_reach_the_tool_verbatim_and_references_are_filled(use_models, ctx):
    SEEN.clear()
    plan = plan_of(
        step(1, "note", {"text": "Total: $1,250.00"}),
        step(2, "price"),
        step(3, "note", {"text": "price ${2}, $2 off, was $9.99; escaped $$2"}, [2]),
    )
    out = run(use_models, ctx, plan)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert sorted(SEEN) == [  # steps 1 and 3 are independent: either may run first
        "Total: $1,250.00",
        "price 12.50, $2 off, was $9.99; escaped $2",
    ]


@pytest.mark.parametrize("text", ["$1\u0663", "see $1\u0663.path", "${1\u0663}", "$\u0661"])
def test_digits_of_other_scripts_are_not_step_numbers(text):
    """Only ASCII digits number a step: "$1٣" is not a reference to step 13."""
    steps = [step(i, "price") for i in range(1, 14)]
    plan = validate_plan(
        plan_of(*steps, step(14, "note", {"text": text})), registry(), max_steps=20
    )
    assert plan.steps[13].depends_on == []
