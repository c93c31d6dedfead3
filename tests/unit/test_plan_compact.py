"""The compact plan format: ids by position, dependencies by references, derived descriptions."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import tool

from planexec.plan import PlanValidationError, to_doc, validate_plan
from planexec.plan.checks import tool_summary
from planexec.tools import ToolRegistry, default_registry
from tests.helpers import echo, sleep_for
from tests.strategies import examples

TOOLS = ToolRegistry([echo, sleep_for])
DERIVED = tool_summary("echo", TOOLS)


@tool
def two_args(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def doc(data, tools=TOOLS, **kw):
    return to_doc(validate_plan(data, tools, max_steps=kw.pop("max_steps", 50), **kw), version=1)


def errors_of(data, **kw) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        validate_plan(data, TOOLS, max_steps=50, **kw)
    return info.value.errors


def test_compact_steps_are_written_out_in_full():
    compact = {
        "goal": "g",
        "steps": [
            {"echo": {"text": "a"}},
            {"sleep_for": {"seconds": 0}, "depends_on": [1]},
            {"echo": {"text": "${1} and $2.label"}, "expected_output": "both"},
            {"description": "Sum up $3", "args": {"about": "$3"}, "tools": ["echo"]},
        ],
    }
    steps = doc(compact)["steps"]
    assert [s["id"] for s in steps] == [1, 2, 3, 4]
    assert [s["depends_on"] for s in steps] == [[], [1], [1, 2], [3]]
    assert [s["tool"] for s in steps] == ["echo", "sleep_for", "echo", None]
    assert (
        steps[0]["description"] == tool_summary("echo", TOOLS) == "echo: Return the text unchanged"
    )
    assert steps[2]["expected_output"] == "both"
    assert steps[3] == {
        "id": 4,
        "tool": None,
        "tools": ["echo"],
        "args": {"about": "$3"},
        "description": "Sum up $3",
        "depends_on": [3],
        "expected_output": "",
    }


def test_a_full_step_keeps_its_content():
    full = {"id": 1, "tool": "echo", "args": {"text": "a"}, "description": "d"}
    later = {**full, "id": 3, "args": {"text": "$1"}, "depends_on": [2, 1]}
    steps = doc({"goal": "g", "steps": [full, {**full, "id": 2}, later]})["steps"]
    assert steps[2]["depends_on"] == [2, 1]  # every reference listed: kept as written


def test_implied_ids_start_after_the_kept_steps():
    plan = validate_plan(
        {"goal": "g", "steps": [{"echo": {"text": "$4"}}, {"echo": {"text": "$5"}}]},
        TOOLS,
        max_steps=5,
        kept=frozenset({1, 4}),
    )
    assert [(s.id, s.depends_on) for s in plan.steps] == [(5, [4]), (6, [5])]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([{"id": 1, "echo": {"text": "a"}}, {"echo": {"text": "b"}}], "give every step an id"),
        ([{"echo": {"text": "a"}, "sleep_for": {"seconds": 1}}], "name one tool"),
        ([{"echo": {"text": "a"}, "args": {"text": "b"}}], "under its key"),
        ([{"args": {"x": 1}}], "a step with no tool needs a description"),
        ([{"nope": {}}], "unknown tool 'nope'"),
        ([{"echo": 1}], "echo argument text: Input should be a valid string"),
        ([{"echo": {"text": "$2"}}], "refers to $2, but there is no step 2"),
        ([{"echo": {"text": "$1"}}], "depends on itself"),
        ([{"echo": {"text": f"${2**70}"}}], f"refers to ${2**70}, but there is no step"),
        ([{"echo": {"text": "$2"}}, {"echo": {"text": "$1"}}], "dependency cycle"),
    ],
)
def test_bad_compact_steps_are_explained(steps, expected):
    found = errors_of({"goal": "g", "steps": steps})
    assert any(expected in e for e in found), found


def test_the_demo_plan_is_compact_and_stored_complete():
    """The shipped demo plan is compact; state gets it whole."""
    text = (resources.files("planexec") / "demo" / "sales_plan.json").read_text()
    assert '"id"' not in text and '"depends_on"' not in text
    steps = doc(json.loads(text), default_registry())["steps"]
    assert [(s["id"], s["depends_on"]) for s in steps] == [
        (1, []),
        (2, [1]),
        (3, [2]),
        (4, [2]),
        (5, [2]),
        (6, [2, 3, 4, 5]),
    ]
    assert all(s["description"] for s in steps)  # derived from the tool where none is given
    assert steps[5]["expected_output"] == "output/report.md embedding the numbers and the chart"


def _dag(n: int, data: st.DataObject) -> dict:
    """A random valid full plan: each step waits for earlier ones, by reference or not."""
    steps = []
    for i in range(1, n + 1):
        deps = data.draw(st.lists(st.integers(1, i - 1), unique=True, max_size=3)) if i > 1 else []
        by_ref = data.draw(st.lists(st.sampled_from(deps), unique=True)) if deps else []
        text = " ".join(f"${{{d}}}" for d in by_ref) or f"text {i}"
        described = data.draw(st.booleans())
        tool_less = data.draw(st.booleans())
        steps.append(
            {
                "id": i,
                "tool": None if tool_less else "echo",
                "tools": ["echo"] if tool_less and data.draw(st.booleans()) else [],
                "args": {"text": text},
                "description": f"do {i}" if described or tool_less else DERIVED,
                "depends_on": sorted(deps),
                "expected_output": data.draw(st.sampled_from(["", "some text"])),
            }
        )
    return {"goal": "random DAG", "steps": steps}


def _compact(full: dict) -> dict:
    steps = []
    for s in full["steps"]:
        refs = {int(w[2:-1]) for w in s["args"]["text"].split() if w.startswith("${")}
        step = {s["tool"]: s["args"]} if s["tool"] else {"args": s["args"]}
        extra = [d for d in s["depends_on"] if d not in refs]
        step |= {"depends_on": extra} if extra else {}
        if s["tool"] is None or s["description"] != DERIVED:
            step["description"] = s["description"]
        step |= {"tools": s["tools"]} if s["tools"] else {}
        step |= {"expected_output": s["expected_output"]} if s["expected_output"] else {}
        steps.append(step)
    return {"goal": full["goal"], "steps": steps}


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 30), st.data())
def test_compact_and_full_formats_store_the_same_plan(n, data):
    full = _dag(n, data)
    assert doc(_compact(full)) == doc(full)


def test_a_tool_with_one_required_argument_takes_it_bare():
    steps = doc({"goal": "g", "steps": [{"echo": "hi"}, {"sleep_for": 0.5}, {"echo": "$1"}]})[
        "steps"
    ]
    assert [(s["tool"], s["args"], s["depends_on"]) for s in steps] == [
        ("echo", {"text": "hi"}, []),
        ("sleep_for", {"seconds": 0.5}, []),
        ("echo", {"text": "$1"}, [1]),
    ]


def test_a_bare_value_is_refused_where_it_names_no_argument():
    both = ToolRegistry([echo, two_args])
    with pytest.raises(PlanValidationError) as info:
        validate_plan({"goal": "g", "steps": [{"two_args": 1}]}, both, max_steps=5)
    assert info.value.errors == [
        "step 1: give two_args's arguments as an object, "
        '{"two_args": {"<name>": <value>, ...}}: a bare value stands only for the one required '
        "argument of a tool that has one"
    ]
    unknown = errors_of({"goal": "g", "steps": [{"nope": "x"}]})
    assert any("unknown tool 'nope'" in e for e in unknown), unknown


def test_a_plan_without_a_goal_takes_the_one_it_is_given():
    data = {"steps": [{"echo": "hi"}]}
    assert doc(data, goal="Say hi")["goal"] == "Say hi"
    assert doc({**data, "goal": "Greet"}, goal="Say hi")["goal"] == "Greet"  # written: kept
    assert any("goal" in e for e in errors_of(data))  # none written, none given


def test_a_goal_from_a_task_is_its_first_line_shortened():
    from planexec.plan import goal_of_task

    assert goal_of_task("  Count the rows \n\nthen more detail") == "Count the rows"
    long = goal_of_task("x" * 500)
    assert len(long) == 200 and long.endswith("…")
