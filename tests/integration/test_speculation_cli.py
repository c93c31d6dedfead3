"""``planexec run --speculate``: read-only steps run while you review the plan, shown as such.

The plan view says which steps run while you read; their lines say they ran before approval
(not approved yet), never as steps of the approved plan; after the approval the steps it keeps
say so, and ``planexec show`` marks them. A prompt asked while they run stays whole.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from planexec.cli import app
from planexec.cli.ui import LiteralConsole
from tests.helpers import plan_of, step, wait_until
from tests.integration.test_cli_pty import (
    SLEEPY_EDITOR,
    ctrl_c_caught_by_another_thread,
    ctrl_c_in_the_sleepy_editor,
    finish,
    spawn,
)

runner = CliRunner()

TOOLS_MODULE = '''\
import os
import time
from pathlib import Path


def _log(line):
    with Path(os.environ["SPEC_LOG"]).open("a") as log:
        log.write(line + "\\n")


def look(x: str, seconds: float = 0.3) -> str:
    """Look at x: read-only, takes some seconds."""
    _log(f"look {x}")
    time.sleep(seconds)
    _log(f"looked {x}")
    return f"saw {x}"


def send(x: str) -> str:
    """Send x somewhere (a side effect)."""
    _log(f"send {x}")
    return f"sent {x}"


look.metadata = {"side_effects": False, "open_world": False}  # read-only, stays inside
send.metadata = {"side_effects": True}
TOOLS = [look, send]
'''

PLAN = plan_of(
    step(1, "look", {"x": "a", "seconds": 0.3}),
    step(2, "look", {"x": "b", "seconds": 0.3}, [1]),
    step(3, "send", {"x": "$2"}, [2]),
    goal="look, then send",
)


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    monkeypatch.setenv("SPEC_LOG", str(tmp_path / "calls.log"))
    monkeypatch.delenv("PLANEXEC_SPECULATE", raising=False)
    (tmp_path / "speclib.py").write_text(TOOLS_MODULE)
    (tmp_path / "planner.json").write_text(
        json.dumps([{"tool_calls": [{"name": "Plan", "args": PLAN}]}])
    )
    return tmp_path


def calls(env: Path) -> list[str]:
    log = env / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def run_args(env: Path, *more: str) -> list[str]:
    planner = f"scripted:{env / 'planner.json'}"
    return ["run", "look and send", "--planner-model", planner, "--tools", "speclib.py:TOOLS",
            "--workspace", "ws", *more]  # fmt: skip


def test_the_plan_view_says_what_runs_while_you_read_and_the_approval_keeps_it(env, monkeypatch):
    asked = []

    def reviewer(prompt: object) -> str:  # asked in a thread while the read-only steps run
        asked.append((str(prompt), list(calls(env))))
        time.sleep(1.0)  # the reviewer reads; both read-only steps finish meanwhile
        return "y"

    monkeypatch.setattr(LiteralConsole, "input", lambda self, prompt, **kw: reviewer(prompt))
    result = runner.invoke(app, run_args(env, "--speculate", "tools"))
    out = result.output
    assert result.exit_code == 0, out
    assert len(asked) == 1 and "Run this plan?" in asked[0][0]
    assert "looked a" not in asked[0][1]  # asked at once: not after the read-only steps
    assert "runs now, read-only: 1, 2" in out
    assert "◇ step 1 ran before approval (not approved yet)" in out and ": saw a" in out
    assert "◇ step 2 ran before approval (not approved yet)" in out and ": saw b" in out
    assert "kept from review: step 1, 2" in out
    assert "✔ step 3 done" in out and "✔ step 1 done" not in out and "✔ step 2 done" not in out
    assert "▶ step 1" not in out and "▶ step 3 running (send)" in out
    assert calls(env) == ["look a", "looked a", "look b", "looked b", "send saw b"]
    tid = re.search(r"thread ([0-9a-f-]{36})", out).group(1)
    shown = runner.invoke(app, ["show", tid]).output
    assert shown.count("succeeded (kept from review)") == 2, shown
    assert "approved by" in out


def test_a_cancel_while_steps_run_stops_them_and_discards_what_ran(env, monkeypatch):
    def reviewer(prompt: object) -> str:
        time.sleep(0.45)  # step 1 has finished, step 2 runs
        return "c"

    monkeypatch.setattr(LiteralConsole, "input", lambda self, prompt, **kw: reviewer(prompt))
    started = time.monotonic()
    result = runner.invoke(app, run_args(env, "--speculate", "tools"))
    out = result.output
    assert result.exit_code == 1 and "cancelled" in out, out
    assert "discarded: step 1 (ran before approval; the plan was not approved)" in out
    assert "kept from review" not in out and "send" not in " ".join(calls(env))
    assert time.monotonic() - started < 5
    assert wait_until(lambda: "looked b" in calls(env), 5)  # the stopped call's thread ended


def test_no_answer_on_stdin_pauses_the_run_while_steps_run(env):
    result = runner.invoke(app, run_args(env, "--speculate", "tools"), input="")
    assert result.exit_code == 1 and "no answer on stdin; the run is paused" in result.output
    assert not [c for c in calls(env) if c.startswith("send")]


def test_with_yes_nothing_runs_before_the_approval(env):
    result = runner.invoke(app, run_args(env, "--speculate", "tools", "--yes"))
    out = result.output
    assert result.exit_code == 0, out
    assert "runs now" not in out and "before approval" not in out and "kept from review" not in out
    assert "✔ step 1 done" in out and "✔ step 2 done" in out
    assert calls(env) == ["look a", "looked a", "look b", "looked b", "send saw b"]


def test_without_speculate_the_plan_waits_for_the_approval(env, monkeypatch):
    asked = []
    monkeypatch.setattr(
        LiteralConsole, "input", lambda self, prompt, **kw: asked.append(calls(env)) or "y"
    )
    result = runner.invoke(app, run_args(env))
    assert result.exit_code == 0, result.output
    assert asked == [[]] and "runs now" not in result.output


def test_a_wrong_speculate_mode_is_one_line(env):
    result = runner.invoke(app, run_args(env, "--speculate", "everything"))
    assert result.exit_code == 2
    said = "--speculate (or $PLANEXEC_SPECULATE) takes tools or models (or off), not 'everything'"
    assert said in result.output


SLOW_PLAN = plan_of(  # read-only steps that take long enough to finish while the prompt waits
    step(1, "look", {"x": "a", "seconds": 0.5}),
    step(2, "look", {"x": "b", "seconds": 1.0}, [1]),
    step(3, "send", {"x": "$2"}, [2]),
)


def run_slow_plan(tmp_path: Path) -> pexpect.spawn:
    """Start ``planexec run --speculate tools`` of :data:`SLOW_PLAN` in a terminal."""
    (tmp_path / "speclib.py").write_text(TOOLS_MODULE)
    (tmp_path / "plan.json").write_text(json.dumps(SLOW_PLAN))
    return spawn(tmp_path, "run", "--plan", "plan.json", "--tools", "speclib.py:TOOLS",
                 "--workspace", "ws", "--speculate", "tools",
                 SPEC_LOG=str(tmp_path / "calls.log"))  # fmt: skip


def test_lines_that_arrive_while_the_prompt_waits_go_above_it(tmp_path):
    child = run_slow_plan(tmp_path)
    child.expect("runs now, read-only: 1, 2")
    child.expect(r"Run this plan\?")
    child.expect(r"step 2(\x1b\[[0-9;]*m)* ran before approval \(not approved yet\) in \d")
    child.expect(r"Run this plan\?")  # asked again below the line, whole
    raw = child.logfile_read.getvalue()
    assert "[y]: \r\x1b[2K" in raw  # the waiting prompt's line was cleared, not written into
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    assert "kept from review: step 1, 2" in text
    assert calls(tmp_path) == ["look a", "looked a", "look b", "looked b", "send saw b"]


def test_ctrl_c_at_a_speculating_prompt_exits_130_and_says_how_to_resume(tmp_path):
    (tmp_path / "speclib.py").write_text(TOOLS_MODULE)
    (tmp_path / "plan.json").write_text(json.dumps(SLOW_PLAN))
    args = ["--tools", "speclib.py:TOOLS", "--speculate", "tools"]
    log = {"SPEC_LOG": str(tmp_path / "calls.log")}
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws", *args, **log)
    child.expect(r"Run this plan\?")
    child.sendintr()
    text, code = finish(child)
    assert code == 130, text
    tid = re.search(r"thread ([0-9a-f-]{36})", text).group(1)
    assert f"planexec resume {tid}" in text and "Traceback" not in text
    assert not [c for c in calls(tmp_path) if c.startswith("send")]
    resumed = spawn(tmp_path, "resume", tid, *args, **log)  # --speculate allows it again
    resumed.expect("runs now, read-only: 1, 2")
    resumed.expect(r"Run this plan\?")
    resumed.sendline("y")
    text, code = finish(resumed)
    assert code == 0, text
    assert calls(tmp_path)[-1] == "send saw b"


def test_ctrl_c_at_a_prompt_whose_early_steps_ended_leaves_whichever_thread_gets_it(tmp_path):
    child = run_slow_plan(tmp_path)
    child.expect(r"step 2(\x1b\[[0-9;]*m)* ran before approval")
    child.expect(r"Run this plan\?")
    time.sleep(1.0)  # the early steps ended: the run waits for the answer, nothing else
    ctrl_c_caught_by_another_thread(child)
    text, code = finish(child, timeout=10)
    assert code == 130, text
    assert "planexec resume" in text and "Traceback" not in text
    assert not [c for c in calls(tmp_path) if c.startswith("send")]


def test_ctrl_c_in_the_editor_while_steps_run_is_the_editors(tmp_path):
    (tmp_path / "speclib.py").write_text(TOOLS_MODULE)
    (tmp_path / "plan.json").write_text(json.dumps(SLOW_PLAN))
    editor = tmp_path / "editor.py"
    editor.write_text(SLEEPY_EDITOR)
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws",
                  "--tools", "speclib.py:TOOLS", "--speculate", "tools",
                  SPEC_LOG=str(tmp_path / "calls.log"), EDITOR=f"{sys.executable} {editor}",
                  TMPDIR=str(tmp_path))  # fmt: skip
    child.expect(r"Run this plan\?")
    ctrl_c_in_the_sleepy_editor(child, tmp_path)
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    assert calls(tmp_path)[-1] == "send saw b"
