"""The judge: structured verdicts from the model, and a note (no verdicts) when unreadable."""

from __future__ import annotations

import asyncio

import pytest

from planexec.judging import NOT_UNDERSTOOD, judge
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.llm.scrubbed import ScrubbedChatModel
from planexec.llm.usage import UsageCounter
from tests.helpers import step, text_reply

STEPS = [step(1, "echo", expected="a greeting"), step(2, "echo", expected="a number")]
OUTPUTS = {1: "hello", 2: "forty-two"}


def verdicts_reply(*verdicts: dict) -> ScriptedReply:
    return ScriptedReply(tool_calls=[{"name": "Verdicts", "args": {"verdicts": list(verdicts)}}])


@pytest.mark.parametrize("wrapped", [True, False])
def test_verdicts_on_the_steps_shown_are_kept(wrapped):
    reply = verdicts_reply(
        {"step": 1, "ok": True},
        {"step": 2, "ok": False, "reason": "not a number"},
        {"step": 9, "ok": False},  # not shown: dropped
    )
    scripted = ScriptedChatModel(replies=[reply])
    model = ScrubbedChatModel.around(scripted) if wrapped else scripted
    judgement = asyncio.run(judge(model, STEPS, OUTPUTS))
    assert judgement.note == ""
    assert {s: (v.ok, v.reason) for s, v in judgement.verdicts.items()} == {
        1: (True, ""),
        2: (False, "not a number"),
    }
    assert '"expected_output": "a number"' in scripted.prompts[0]


@pytest.mark.parametrize(
    "reply",
    [
        text_reply("all fine"),  # no tool call
        verdicts_reply({"step": "one", "ok": "maybe"}),  # not Verdicts
        ScriptedReply(tool_calls=[{"name": "Other", "args": {"verdicts": []}}]),
    ],
)
def test_an_unreadable_reply_gives_no_verdicts_and_its_call_still_counts(reply):
    counter = UsageCounter("evaluator")
    model = ScrubbedChatModel.around(ScriptedChatModel(replies=[reply]))
    judgement = asyncio.run(judge(model, STEPS, OUTPUTS, counter.config()))
    assert judgement.verdicts == {} and judgement.note == NOT_UNDERSTOOD
    assert counter.usage()["evaluator"]["calls"] == 1
