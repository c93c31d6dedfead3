"""Reading a plan out of a model's reply: the Plan tool call, or (fenced) JSON text."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage

from planexec.drafting import draft_plan, drafting, plan_data
from planexec.llm.scripted import ScriptedChatModel
from planexec.llm.usage import UsageCounter
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, step, text_reply

PLAN = plan_of(step(1, "echo", {"text": "hi"}))


@pytest.mark.parametrize(
    "text",
    [
        '{"goal": "g", "steps": []}',
        '```json\n{"goal": "g", "steps": []}\n```',
        '```\n{"goal": "g", "steps": []}\n```',
        '  Here it is:\n```json\n{"goal": "g", "steps": []}\n```  ',
    ],
)
def test_json_text_is_read_fenced_or_not(text):
    assert plan_data(AIMessage(content=text)) == ({"goal": "g", "steps": []}, None)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"goal": "g", "steps": [', "neither a Plan tool call nor valid JSON"),  # cut off
        ("I think we should...", "neither a Plan tool call nor valid JSON"),
        ('{"goal": 1' + "9" * 5000 + "}", "neither a Plan tool call nor valid JSON"),
        ("  ", "the reply contained no plan: call the Plan tool"),
    ],
)
def test_a_reply_without_a_readable_plan_says_why(content, problem):
    data, found = plan_data(AIMessage(content=content))
    assert data is None and found is not None and problem in found


def test_the_plan_tool_call_wins_and_a_broken_one_is_reported():
    call = {"name": "Plan", "args": PLAN, "id": "1"}
    assert plan_data(AIMessage(content="ignored", tool_calls=[call])) == (PLAN, None)
    bad = {"name": "Plan", "args": "{", "id": "1", "error": "oops", "type": "invalid_tool_call"}
    _, problem = plan_data(AIMessage(content="", invalid_tool_calls=[bad]))
    assert problem == "the Plan tool call's arguments are not valid JSON: oops"


def test_an_invalid_draft_is_repaired_and_every_call_is_counted():
    model = ScriptedChatModel(replies=[text_reply("no plan"), plan_reply(PLAN)])
    counter = UsageCounter("planner")
    conversation = drafting([], ToolRegistry([echo]), max_steps=5, max_repairs=2)
    draft = asyncio.run(draft_plan(model, conversation, config=counter.config()))
    assert draft.plan is not None and draft.errors == [] and draft.attempts == 2
    assert "neither a Plan tool call nor valid JSON" in model.prompts[1]
    assert counter.usage()["planner"]["calls"] == 2
