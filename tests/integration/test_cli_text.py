"""Whatever text a plan, a tool, a model or an error holds, the CLI shows it literally."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from planexec.cli.board import PlanBoard
from planexec.cli.outcome import print_outcome
from planexec.cli.progress import event_line
from planexec.cli.render import levels, print_plan
from planexec.cli.ui import LiteralConsole, styled, visible
from planexec.cli.views import print_thread, threads_table
from planexec.runs import ThreadState
from tests.strategies import examples

ALPHABET = st.sampled_from(
    list("ab [/]\\:#@=*_~`é中🙂\x1b\x9b\x00\x07\n") + ["[bold]", "[/]", ":smile:"]
)
TEXT = st.lists(ALPHABET, min_size=1, max_size=30).map("".join)


def recording(width: int = 10_000) -> LiteralConsole:
    return LiteralConsole(
        record=True, width=width, color_system=None, markup=False, emoji=False, highlight=False,
        soft_wrap=True,
    )  # fmt: skip


def shown(text: str) -> list[str]:
    """The lines of ``text`` as the screen must hold them (control characters made visible)."""
    return [line.strip() for line in visible(text).split("\n") if line.strip()]


def a_plan(text: str) -> dict:
    step = {"id": 1, "tool": text, "tools": [text], "args": {text: text}, "description": text,
            "depends_on": [], "expected_output": text}  # fmt: skip
    return {"goal": text, "steps": [step, {**step, "id": 2, "tool": None, "depends_on": [1]}],
            "version": 1}  # fmt: skip


@given(text=TEXT)
@settings(max_examples=examples(60), deadline=None)
def test_every_text_field_is_shown_literally_and_sends_no_control_character(text):
    out = recording()
    plan = a_plan(text)
    print_plan(out, plan, {"1": {"status": text}})
    narrow = recording(width=40)  # each step as a block, not a table
    print_plan(narrow, plan, {"1": {"status": text}})
    board = PlanBoard(out)
    board.show(plan, "first")
    board.show({**plan, "goal": text + "!", "steps": plan["steps"][:1]}, "second")
    for kind in ("step_finished", "step_failed", "step_skipped", "step_retry", "tool_call_refused"):
        event = {
            "event": kind,
            "step": 1,
            "summary": text,
            "error": text,
            "reason": text,
            "tool": text,
        }
        out.print(event_line(event, 0.5))
    values = {
        "task": text,
        "plan": plan,
        "steps": {"1": {"status": "failed", "error": text, "summary": text}},
        "revisions": [{"version": 1, "reason": text}],
        "usage": {text: {"calls": 1, "input_tokens": 2, "output_tokens": 3}},
        "final": {"status": text, "answer": text, "artifacts": [text]},
    }
    print_outcome(out, values, "t-1", text, 1.0)
    print_thread(out, ThreadState("t-1", values, (), workspace=text))
    out.print(
        threads_table([{"thread_id": "t", "task": text, "status": text, "updated": None}], text)
    )
    out.print(styled(("error:", "red"), " ", text))
    screen = out.export_text() + narrow.export_text()
    assert not [c for c in screen if c != "\n" and (ord(c) < 32 or 127 <= ord(c) < 160)]
    flat = screen.replace("\n", " ")
    for line in shown(text):
        assert line in flat


def test_a_thirty_step_full_fan_in_plan_draws_each_step_once():
    steps = [
        {"id": i, "tool": "list_files", "tools": [], "args": {}, "description": f"step {i}",
         "depends_on": list(range(1, i)), "expected_output": ""}
        for i in range(1, 31)
    ]  # fmt: skip
    plan = {"goal": "fan in", "steps": steps, "version": 1}
    assert [len(group) for group in levels(plan)] == [1] * 30
    out = recording(width=120)
    started = time.perf_counter()
    print_plan(out, plan)
    assert time.perf_counter() - started < 1.0  # about 0.05 s here
    order = out.export_text().split("runs in this order")[1].strip().splitlines()
    assert len(order) == 31  # a heading, then each step once
    assert order[-1].strip() == "30. step 30 after 1-29"


def test_a_thousand_step_plan_is_drawn_in_lines_linear_in_its_size():
    steps = [
        {"id": i, "tool": "list_files", "tools": [], "args": {}, "description": "d",
         "depends_on": [j for j in (i - 1, i - 2) if j > 0], "expected_output": ""}
        for i in range(1, 1001)
    ]  # fmt: skip
    out = recording(width=120)
    print_plan(out, {"goal": "long", "steps": steps, "version": 1})
    assert len(out.export_text().splitlines()) < 3 * 1000 + 10


def test_a_cyclic_plan_from_a_hand_made_state_is_still_shown():
    steps = [
        {"id": 1, "tool": "x", "tools": [], "args": {}, "description": "a", "depends_on": [2],
         "expected_output": ""},
        {"id": 2, "tool": "x", "tools": [], "args": {}, "description": "b", "depends_on": [1],
         "expected_output": ""},
    ]  # fmt: skip
    out = recording()
    print_plan(out, {"goal": "g", "steps": steps, "version": 1})
    screen = out.export_text()
    assert "step 1 after 2" in screen and "step 2 after 1" in screen
