"""The approval's human-in-the-loop shapes, checked against the libraries' own types."""

from __future__ import annotations

import json

import pytest
from langchain.agents.middleware.human_in_the_loop import HITLRequest, HITLResponse
from langgraph.prebuilt.interrupt import HumanInterrupt, HumanResponse
from pydantic import TypeAdapter

from planexec.review import describe, hitl
from planexec.state import PlanDoc

PLAN: PlanDoc = {
    "goal": "Sum | the sales",
    "version": 3,
    "steps": [
        {
            "id": 1,
            "tool": "read_csv",
            "tools": [],
            "args": {"path": "sales.csv"},
            "description": "read",
            "depends_on": [],
            "expected_output": "rows",
        },
        {
            "id": 2,
            "tool": None,
            "tools": ["write_file"],
            "args": {},
            "description": "write | a\nsummary",
            "depends_on": [1],
            "expected_output": "text",
        },
    ],
}


def strict(kind):
    """Validate like a UI would read it: every required key, with its type."""
    return TypeAdapter(kind).validate_python


def request(can_approve=True):
    calls = describe.estimate_model_calls(PLAN, max_turns=6, judge=True)
    text = describe.describe_plan(PLAN, ["write_file"], calls, [])
    return hitl.requests(PLAN, text, can_approve=can_approve)


def test_the_request_is_a_v1_hitl_request_and_a_legacy_agent_inbox_interrupt():
    fields = request()
    strict(HITLRequest)(fields)
    strict(HumanInterrupt)(fields)
    assert fields["action_requests"][0]["args"] == {"goal": PLAN["goal"], "steps": PLAN["steps"]}
    assert fields["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    blocked = request(can_approve=False)
    assert blocked["review_configs"][0]["allowed_decisions"] == ["edit", "reject"]
    assert blocked["config"]["allow_accept"] is False


def test_the_description_is_a_markdown_table_with_side_effects_and_model_calls():
    text = request()["description"]
    assert '| 1 | `read_csv` | `{"path": "sales.csv"}` |  |' in text
    assert "| 2 | model (`write_file`) | write \\| a summary | 1 |" in text  # one line, escaped
    assert "Side-effecting tools: `write_file`." in text
    assert "Model calls to run it: 2 to 7 (if no step is retried)." in text


def V1_TEXT(steps: str) -> dict:
    edit = {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": steps}}}
    return {"decisions": [edit]}


EDITED = {"goal": "g", "steps": [{"id": 1, "tool": "echo", "args": {"text": "x"}}]}
V1 = [
    ({"decisions": [{"type": "approve"}]}, {"action": "approve"}),
    (
        {"decisions": [{"type": "reject", "message": "use 2025"}]},
        {"action": "reject", "feedback": "use 2025"},
    ),
    (
        {"decisions": [{"type": "reject"}]},
        {"action": "cancel", "reason": "rejected without a message"},
    ),
    (  # a version or digest beside the type names the plan, checked by the approval node
        {"decisions": [{"type": "approve", "digest": "d", "version": 3}]},
        {"action": "approve", "digest": "d", "version": 3},
    ),
    (
        {"decisions": [{"type": "edit", "edited_action": {"name": "run_plan", "args": EDITED}}]},
        {"action": "edit", "plan": EDITED},
    ),
    (  # Agent Chat UI: an edited field comes back as its textarea's text
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "run_plan",
                        "args": {"goal": "g", "steps": json.dumps(EDITED["steps"])},
                    },
                }
            ]
        },
        {"action": "edit", "plan": EDITED},
    ),
]
LEGACY = [
    ([{"type": "accept", "args": None}], {"action": "approve"}),
    (
        [{"type": "response", "args": "fewer steps"}],
        {"action": "reject", "feedback": "fewer steps"},
    ),
    ([{"type": "ignore", "args": None}], {"action": "cancel", "reason": "ignored"}),
    (
        [{"type": "edit", "args": {"action": "run_plan", "args": EDITED}}],
        {"action": "edit", "plan": EDITED},
    ),
]


@pytest.mark.parametrize(("answer", "read"), V1)
def test_v1_decisions_are_read_into_planexec_answers(answer, read):
    strict(HITLResponse)(answer)
    assert hitl.from_hitl_format(answer) == read


@pytest.mark.parametrize(("answer", "read"), LEGACY)
def test_legacy_responses_are_read_into_planexec_answers(answer, read):
    strict(list[HumanResponse])(answer)
    assert hitl.from_hitl_format(answer) == read


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"decisions": [{"type": "reject", "message": "  "}]}, "a reject needs text"),
        ({"decisions": [{"type": "reject", "message": ["x"]}]}, "a reject needs text"),
        ({"decisions": ["approve"]}, "a decision is an object"),
        ({"decisions": [None]}, "a decision is an object"),
        ({"decisions": [{"type": "approve", "plan": {}}]}, "the approve decision has no 'plan'"),
        ({"decisions": [{"type": "approve"}], "extra": 1}, "only 'decisions'"),
        (V1_TEXT("[" * 100_000), "the edited steps cannot be read"),
        (V1_TEXT("[" + "1" * 5000 + "]"), "the edited steps cannot be read"),
        (V1_TEXT('[{"text": "a\\u0000b"}]'), "contains a NUL character"),
        (V1_TEXT("[NaN]"), "not a JSON number"),
        (V1_TEXT("[" + str(2**70) + "]"), "outside the 64-bit range"),
        ({"decisions": []}, "exactly one decision"),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "exactly one decision"),
        ({"decisions": [{"type": "respond", "message": "x"}]}, "unknown decision type 'respond'"),
        ([{"type": "response", "args": ""}], "a response needs text"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "rm", "args": {}}}]},
            "cannot change the action",
        ),
        (
            {
                "decisions": [
                    {"type": "edit", "edited_action": {"name": "run_plan", "args": {"steps": "[{"}}}
                ]
            },
            "the edited steps are not JSON",
        ),
        ({"decisions": [{"type": "edit"}]}, "needs the edited action"),
    ],
)
def test_unreadable_answers_are_refused_saying_why(answer, message):
    with pytest.raises(hitl.HitlAnswerError, match=message):
        hitl.from_hitl_format(answer)


@pytest.mark.parametrize("answer", [{"action": "approve", "digest": "x"}, "approve", 7, None, {}])
def test_planexec_answers_pass_unchanged(answer):
    assert hitl.from_hitl_format(answer) == answer


def test_names_in_a_legacy_accept_are_kept_to_be_checked():
    answer = [{"type": "accept", "args": {"digest": "d", "version": 2}}]
    assert hitl.from_hitl_format(answer) == {"action": "approve", "digest": "d", "version": 2}


def rendered(markdown: str) -> list:
    """Parse Markdown as a chat UI renders it (CommonMark with GFM tables, raw HTML on)."""
    from markdown_it import MarkdownIt

    def walk(tokens):
        for token in tokens:
            yield token
            yield from walk(token.children or [])

    return list(walk(MarkdownIt("commonmark").enable("table").parse(markdown)))


HOSTILE = [
    "![pixel](http://127.0.0.1:9/leak.png?d=secret)",
    "<img src='http://127.0.0.1:9/x.png'>",
    "[click](http://127.0.0.1:9/)",
    "<http://127.0.0.1:9/>",
    "`code` | pipe ``two`` *bold* _it_ \\![x](y)",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_plan_cannot_put_images_links_or_html_in_the_reviewers_chat(text):
    """The description is rendered as Markdown in Agent Chat UI's chat: an image in a plan's
    goal or args was fetched by the reviewer's browser as soon as the approval showed."""
    plan: PlanDoc = {
        **PLAN,
        "goal": text,
        "steps": [
            {**PLAN["steps"][0], "args": {"path": text}},
            {**PLAN["steps"][1], "description": text},
        ],
    }
    calls = describe.estimate_model_calls(plan, max_turns=6, judge=False)
    tokens = rendered(describe.describe_plan(plan, ["write_file"], calls, [text]))
    kinds = {t.type for t in tokens}
    assert not kinds & {"image", "link_open", "html_inline", "html_block"}, kinds
    assert "table_open" in kinds and sum(t.type == "tr_open" for t in tokens) == 3
    shown = "".join(t.content for t in tokens if t.type in ("text", "code_inline"))
    assert text.replace("\\", "") in shown.replace("\\", "")  # all of it is still shown
