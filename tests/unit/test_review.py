"""Reviewer answers: every accepted format reads into one decision type, or is refused."""

from __future__ import annotations

import pytest

from planexec.review.decisions import (
    SHAPES,
    AnswerRefused,
    Approve,
    Cancel,
    Reject,
    planexec_answer,
    read_decision,
)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "approve", "digest": "d"}, Approve(action="approve", digest="d")),
        ('{"action": "reject", "feedback": "f"}', Reject(action="reject", feedback="f")),
        (" Cancel ", Cancel(action="cancel")),
        ("approve", Approve(action="approve")),
    ],
)
def test_accepted_formats_read_into_a_decision(answer, expected):
    assert read_decision(answer) == expected


def test_text_that_is_not_json_names_the_action():
    assert planexec_answer("Approve") == {"action": "approve"}
    assert planexec_answer({"action": "edit"}) == {"action": "edit"}


@pytest.mark.parametrize(
    "answer",
    [None, 3, "maybe", "1" * 5000, {"action": "approve", "extra": 1}, {"action": "reject"}],
)
def test_anything_else_is_refused_saying_what_is_expected(answer):
    with pytest.raises(AnswerRefused, match="^answer not understood") as refused:
        read_decision(answer)
    assert str(refused.value).endswith(f"expected {SHAPES}")
