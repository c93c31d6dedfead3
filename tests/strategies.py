"""Hypothesis strategies for malformed plans, planner replies and resume answers."""

from __future__ import annotations

import os

from hypothesis import strategies as st

FUZZ_SCALE = 20


def examples(n: int) -> int:
    """How many examples a property test tries: n in CI, FUZZ_SCALE times more for make fuzz."""
    return n * FUZZ_SCALE if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else n


TOOL_NAMES = ["echo", "sleep_for", "always_fails"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
keys = st.sampled_from(["a", "path", "label", "steps", "id", "\u00fc\x00", "\ud800"])
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=6,
)
references = st.builds(
    lambda i, f, pre: f"{pre}${i}{f}",
    st.integers(-2, 45),
    st.sampled_from(["", ".path", ".label", ".rows.0", ".x.y"]),
    st.sampled_from(["", "see ", "$"]),
)
arg_values = st.one_of(json_like, references, st.floats(0, 0.001))
step_ids = st.one_of(
    st.integers(-2, 45), st.integers(1, 12), st.text(max_size=2), st.none(), st.floats()
)
steps = st.fixed_dictionaries(
    {},
    optional={
        "id": step_ids,
        "tool": st.one_of(
            st.sampled_from([*TOOL_NAMES, "nope", "", "Echo"]), st.none(), st.integers()
        ),
        "args": st.one_of(
            st.dictionaries(
                st.sampled_from(["text", "seconds", "label", "reason", "zz", "ü"]),
                arg_values,
                max_size=3,
            ),
            json_like,
        ),
        "description": st.one_of(st.text(max_size=30), st.none(), st.integers()),
        "depends_on": st.one_of(
            st.lists(st.integers(-2, 45), max_size=4), st.text(max_size=2), st.none()
        ),
        "expected_output": st.one_of(st.text(max_size=20), json_like),
        "tools": st.one_of(
            st.lists(st.sampled_from([*TOOL_NAMES, "nope", "", "Plan", "\x00"]), max_size=3),
            json_like,
        ),
        "extra_field": json_like,
    },
)


def well_formed_step(i: int, deps: list[int]) -> dict:
    return {
        "id": i,
        "tool": "echo",
        "args": {"text": f"step {i}"},
        "description": f"step {i}",
        "depends_on": deps,
        "expected_output": "text",
    }


huge_steps = st.integers(31, 500).map(lambda n: [well_formed_step(i, []) for i in range(1, n + 1)])
plans = st.one_of(
    st.fixed_dictionaries(
        {
            "goal": st.one_of(st.text(max_size=40), st.none()),
            "steps": st.lists(steps, max_size=10) | huge_steps,
        },
        optional={"bogus": json_like},
    ),
    json_like,
    st.text(max_size=200),  # raw text: almost never valid JSON
)


valid_plans = st.integers(1, 6).flatmap(
    lambda n: st.builds(
        lambda deps: {
            "goal": "valid",
            "steps": [well_formed_step(i, d) for i, d in enumerate(deps, 1)],
        },
        st.tuples(
            *[
                st.lists(st.integers(1, i - 1), unique=True, max_size=2) if i > 1 else st.just([])
                for i in range(1, n + 1)
            ]
        ),
    )
)


def _with_step_tools(plan: dict, picks: tuple) -> dict:
    steps = [
        s if tools is None else {**s, "tool": None, "args": {}, "tools": tools}
        for s, tools in zip(plan["steps"], picks, strict=True)
    ]
    return {**plan, "steps": steps}


valid_plans_with_step_tools = valid_plans.flatmap(
    lambda plan: st.tuples(
        *[
            st.none() | st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=3)
            for _ in plan["steps"]
        ]
    ).map(lambda picks: _with_step_tools(plan, picks))
)
planner_replies = st.one_of(
    st.builds(
        lambda p: {"tool_calls": [{"name": "Plan", "args": p}]},
        plans.filter(lambda p: isinstance(p, dict)),
    ),
    st.builds(lambda t: {"content": t}, st.text(max_size=300)),
    st.builds(lambda p: {"tool_calls": [{"name": "Plan", "args": p}]}, valid_plans),
    st.builds(
        lambda name, a: {"tool_calls": [{"name": name, "args": a}]},
        st.sampled_from(["plan", "Other", ""]),
        st.dictionaries(st.text(max_size=4), json_like, max_size=3),
    ),
)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# Values no checkpoint can store (integers beyond 64 bits, NUL, lone surrogates, NaN, deep
# nesting) are included on purpose: planexec must refuse them before LangGraph stores them.
resume_keys = st.sampled_from(["a", "path", "action", "plan", "\u00fc\x00", "\ud800"])
unstorable = st.sampled_from(
    [2**64, -(2**63) - 1, 10**30, "nul\x00", "\ud800", float("nan"), _nested(300)]
)
resume_like = st.recursive(
    scalars | st.integers() | unstorable,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(resume_keys, inner, max_size=3),
    max_leaves=6,
)


resume_answers = st.one_of(
    resume_like,
    st.fixed_dictionaries(
        {
            "action": st.sampled_from(
                ["approve", "edit", "reject", "cancel", "APPROVE", "launch", ""]
            )
        },
        optional={
            "plan": plans.filter(lambda p: isinstance(p, dict)),
            "feedback": st.one_of(st.text(max_size=20), st.integers(-(2**63), 2**63)),
            "reason": resume_like,
        },
    ),
)
