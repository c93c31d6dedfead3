"""The CLI in a pseudo-terminal, as a person sees it: the prompt, editing, Ctrl-C, live status."""

from __future__ import annotations

import ctypes
import io
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pexpect

import planexec
from tests.helpers import ROOT, plan_of, step

WRAPPER = Path(__file__).with_name("slow_cli.py")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def spawn(
    cwd: Path, *args: str, delay: float = 0.0, chunk_delay: float = 0.0, **env: str
) -> pexpect.spawn:
    environment = {**os.environ, "PLANEXEC_DB": str(cwd / "runs.sqlite"), **env}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(Path(planexec.__file__).parents[1]), str(ROOT)]
    )
    environment["PLANEXEC_TEST_MODEL_DELAY"] = str(delay)
    environment["PLANEXEC_TEST_CHUNK_DELAY"] = str(chunk_delay)
    environment.pop("COLUMNS", None)
    child = pexpect.spawn(
        sys.executable,
        [str(WRAPPER), *args],
        cwd=str(cwd),
        env=environment,
        encoding="utf-8",
        codec_errors="replace",  # what the terminal echoes of bytes that are not UTF-8
        dimensions=(50, 140),
        timeout=60,
        # a terminal's program gets Ctrl-C; a CI job started in the background ignores SIGINT,
        # and the child would inherit that (Python then installs no KeyboardInterrupt handler)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    child.logfile_read = io.StringIO()
    return child


def screen(child: pexpect.spawn) -> str:
    """Everything the child printed so far, without colours and cursor moves."""
    return ANSI.sub("", child.logfile_read.getvalue())


def finish(child: pexpect.spawn, timeout: float = 60) -> tuple[str, int]:
    if (
        child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=timeout) == 1
    ):  # stuck: where is each thread?
        child.kill(signal.SIGUSR1)
        child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=5)
        child.terminate(force=True)
        raise AssertionError(f"the command did not end:\n{screen(child)}")
    text = screen(child)
    child.close()
    return text, child.exitstatus if child.exitstatus is not None else -child.signalstatus


def script(path: Path, *plans: dict) -> str:
    path.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": p}]} for p in plans]))
    return f"scripted:{path}"


HOSTILE = "Sum [revenue] by [region] [/] [bold]not bold[/bold] :smile:"


def test_live_status_while_the_planner_works_then_y_approves(tmp_path):
    plan = plan_of(
        {**step(1, "write_file", {"path": "a.txt", "content": "[/] hi"}), "description": HOSTILE},
        goal="Write [a.txt] [/]",
    )
    planner = script(tmp_path / "planner.json", plan)
    child = spawn(tmp_path, "run", "write a file", "--planner-model", planner,
                  "--workspace", "ws", delay=1.5)  # fmt: skip
    child.expect(r"writing the plan \d+\.\ds")  # the status line, with the time it has taken
    child.expect(r"planned in 1\.\d+s")
    child.expect("Run this plan")
    before = screen(child)
    assert HOSTILE in before and "Write [a.txt] [/]" in before  # literally, as it will run
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    assert (tmp_path / "ws" / "a.txt").read_text() == "[/] hi"
    summary = r"succeeded in \d+\.\ds( \(.* at the prompt\))? · 1 model call \(planner 1\)"
    assert re.search(summary + r" · [\d,]+ tokens", text)
    assert re.search(r"planexec show [0-9a-f-]{36}", text)


def test_ctrl_c_at_the_prompt_leaves_at_once_and_says_how_to_resume(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws")
    child.expect("Run this plan")
    child.sendintr()  # no Enter after it
    text, code = finish(child)
    assert code == 130, text
    tid = re.search(r"thread ([0-9a-f-]{36})", text).group(1)
    assert f"planexec resume {tid}" in text and "Traceback" not in text
    assert not (tmp_path / "ws" / "a.txt").exists()
    resumed = spawn(tmp_path, "resume", tid)
    resumed.expect("Run this plan")
    resumed.sendline("yes")
    text, code = finish(resumed)
    assert code == 0, text
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"


def _threads(pid: int) -> list[int]:
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


def _takes_sigint(pid: int, tid: int) -> bool:
    """Tell whether the kernel may hand SIGINT to this thread (it does not block it)."""
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    blocked = int(re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.M).group(1), 16)
    return not blocked & (1 << (signal.SIGINT - 1))


def ctrl_c_caught_by_another_thread(child: pexpect.spawn) -> None:
    """Ctrl-C as the kernel may deliver it: to a thread of the process other than the main one.

    Any thread that does not block SIGINT may be handed a process's signal; Python then only
    marks it pending for the main thread, which must not sleep in a read that never wakes.
    """
    tids = [t for t in _threads(child.pid) if t != child.pid and _takes_sigint(child.pid, t)]
    assert tids, "the command has one thread only: nothing to deliver the signal to"
    tgkill = ctypes.CDLL(None, use_errno=True).tgkill
    assert tgkill(child.pid, tids[0], signal.SIGINT) == 0


def test_ctrl_c_at_the_prompt_leaves_at_once_whichever_thread_the_signal_lands_on(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws")
    child.expect(r"Run this plan\? .*\[y\]: ")
    time.sleep(0.3)  # waiting in its read
    ctrl_c_caught_by_another_thread(child)
    text, code = finish(child, timeout=10)
    assert code == 130, text
    assert "interrupted; nothing was run; plan v1 waits for your approval" in text
    assert not (tmp_path / "ws" / "a.txt").exists()


def test_ctrl_c_at_a_failed_steps_question_leaves_at_once_whichever_thread_gets_it(tmp_path):
    plan = plan_of(
        {**step(1, "read_file", {"path": "folder"}), "on_failure": "ask"},  # a folder: fails
        step(2, "write_file", {"path": "b.txt", "content": "$1.content"}, [1]),
    )
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "ws" / "folder").mkdir(parents=True)
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws")
    child.expect(r"Run this plan\?")
    child.sendline("y")
    child.expect(r"What now\? .*: ")
    time.sleep(0.3)
    ctrl_c_caught_by_another_thread(child)
    text, code = finish(child, timeout=10)
    assert code == 130, text
    assert "planexec resume" in text and "Traceback" not in text
    assert not (tmp_path / "ws" / "b.txt").exists()


def test_ctrl_c_while_the_plan_is_shown_leaves_before_the_prompt_waits(tmp_path):
    long = "a step described at length " * 40
    steps = [{**step(n, "write_file", {"path": f"{n}.txt", "content": "x"}), "description": long}
             for n in range(1, 31)]  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(plan_of(*steps)))
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws")
    for _ in range(200):  # nobody reads the terminal: the command blocks showing the plan
        if re.search("tty|wait_woken", Path(f"/proc/{child.pid}/wchan").read_text()):
            break
        time.sleep(0.05)
    child.sendintr()  # pressed while the plan is printed, before the prompt waits
    text, code = finish(child, timeout=10)
    assert code == 130, text
    assert "planexec resume" in text and "Traceback" not in text
    assert not (tmp_path / "ws").exists() or not list((tmp_path / "ws").glob("*.txt"))


def test_a_line_ended_by_ctrl_d_then_ctrl_c_in_another_thread_leaves_at_once(tmp_path):
    (tmp_path / "plan.json").write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws")
    child.expect(r"Run this plan\? .*\[y\]: ")
    child.send("ab")
    child.sendeof()  # "ab" reaches the command without a line's end: the line is not whole
    time.sleep(0.3)
    ctrl_c_caught_by_another_thread(child)
    text, code = finish(child, timeout=10)
    assert code == 130, text
    assert not (tmp_path / "ws" / "a.txt").exists()


def test_bytes_that_are_not_text_typed_at_the_prompt_are_asked_again(tmp_path):
    (tmp_path / "plan.json").write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    strict = {"PYTHONIOENCODING": "utf-8"}  # a UTF-8 locale's stdin: strict, as most are
    child = spawn(tmp_path, "run", "--plan", "plan.json", "--workspace", "ws", **strict)
    child.expect(r"Run this plan\? .*\[y\]: ")
    os.write(child.child_fd, b"\xff\xfe\x80\n")
    child.expect("please answer")
    child.sendline("y")
    text, code = finish(child, timeout=30)
    assert code == 0, text
    assert "Traceback" not in text
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"


EDITOR = """\
import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
calls = pathlib.Path(__file__).with_name("calls.log")
seen = path.read_text()
calls.write_text((calls.read_text() if calls.exists() else "") + seen + "\\n=====\\n")
if seen.count("=====") == 0 and "no_such_tool" not in seen:  # first: an invalid plan
    plan = json.loads(seen)
    plan["steps"][0]["tool"] = "no_such_tool"
    path.write_text(json.dumps(plan))
else:  # reopened on that text, the error on top: fix it
    body = "\\n".join(l for l in seen.splitlines() if not l.startswith("//"))
    plan = json.loads(body)
    plan["steps"][0]["tool"] = "write_file"
    plan["steps"][0]["args"]["content"] = "edited"
    path.write_text(json.dumps(plan))
"""


def test_an_invalid_edit_reopens_on_the_users_text_and_the_edited_plan_is_shown(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "original"})))
    )
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws",
                  EDITOR=f"{sys.executable} {editor}")  # fmt: skip
    child.expect("Run this plan")
    child.sendline("e")
    text, code = finish(child)
    assert code == 0, text
    opened = (tmp_path / "calls.log").read_text().split("\n=====\n")
    assert opened[1].startswith("// error: the edited plan is invalid")
    assert '"tool": "no_such_tool"' in opened[1]  # the user's own text, not the original plan
    assert "your edit was refused" in text
    shown = text[text.index("plan v2 runs (your edit)") :]
    change = '~ step 1 args: {"path": "a.txt", "content": "original"} → {"path": "a.txt", '
    assert "changes from v1:" in shown and change + '"content": "edited"}' in shown
    assert shown.index("changes from v1") < shown.index("▶ step 1 running")
    assert (tmp_path / "ws" / "a.txt").read_text() == "edited"


def test_a_replanned_plan_is_shown_with_its_changes_while_the_status_shows_the_replanner(tmp_path):
    (tmp_path / "ws" / "folder").mkdir(parents=True)
    (tmp_path / "ws" / "notes.txt").write_text("the notes")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "read_file", {"path": "folder"}), step(2, "list_files", {})))
    )
    planner = script(
        tmp_path / "planner.json", plan_of(step(3, "read_file", {"path": "notes.txt"}))
    )
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws", "--yes",
                  "--planner-model", planner, delay=1.5)  # fmt: skip
    child.expect(r"revising the plan \d+\.\ds")
    text, code = finish(child)
    assert code == 0, text
    shown = text[text.index("plan v2 runs (revised after failures by the replanner") :]
    assert "+ step 3 (read_file)" in shown and "- step 1 (read_file)" in shown
    assert shown.index("changes from v1") < shown.index("▶ step 3 running")
    assert re.search(r"revised the plan in 1\.\d+s", text)


def test_approval_never_shows_a_revisions_step_started_as_the_revision_is_written(tmp_path):
    # the replanner's new step starts while it writes the revision: its line shows its tool
    # and arguments as written (its id comes after the kept step's), then the revision
    (tmp_path / "ws" / "folder").mkdir(parents=True)
    (tmp_path / "ws" / "notes.txt").write_text("the notes")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "read_file", {"path": "folder"}), step(2, "list_files", {})))
    )
    planner = script(
        tmp_path / "planner.json", plan_of(step(3, "read_file", {"path": "notes.txt"}))
    )
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws",
                  "--planner-model", planner, "--approval", "never")  # fmt: skip
    text, code = finish(child)
    assert code == 0, text
    running = '▶ step 3 running (read_file {"path": "notes.txt"}) as the plan is written'
    assert running in text
    assert text.index(running) < text.index("✔ step 3 done")
    assert text.index(running) < text.index("plan v2 runs (revised after failures")


def test_approval_never_still_shows_the_plan_that_runs(tmp_path):
    # with approval never a step starts as soon as its line of the plan is written: its line
    # shows what it runs (tool and arguments) when it starts; the whole plan once written
    plan = plan_of(step(1, "list_files", {"folder": "."}), goal="look around")
    planner = script(tmp_path / "p.json", plan)
    child = spawn(tmp_path, "run", "look", "--planner-model", planner, "--workspace", "ws",
                  "--approval", "never")  # fmt: skip
    text, code = finish(child)
    assert code == 0, text
    assert "plan v1 runs (planned; no approval needed):" in text and "Plan v1: look around" in text
    running = '▶ step 1 running (list_files {"folder": "."}) as the plan is written'
    assert running in text
    assert text.index(running) < text.index("✔ step 1 done")


def test_a_step_started_as_the_plan_is_written_shows_its_own_arguments(tmp_path):
    # the plan writes its own ids, not in position order: each line names its own step
    plan = plan_of(
        step(2, "list_files", {"folder": "second"}), step(1, "list_files", {"folder": "first"})
    )
    (tmp_path / "ws" / "first").mkdir(parents=True)
    (tmp_path / "ws" / "second").mkdir()
    planner = script(tmp_path / "p.json", plan)
    child = spawn(tmp_path, "run", "look", "--planner-model", planner, "--workspace", "ws",
                  "--approval", "never")  # fmt: skip
    text, code = finish(child)
    assert code == 0, text
    assert '▶ step 1 running (list_files {"folder": "first"}) as the plan is written' in text
    assert '▶ step 2 running (list_files {"folder": "second"}) as the plan is written' in text


def test_ctrl_c_while_the_planner_works_exits_130_with_the_resume_command(tmp_path):
    planner = script(tmp_path / "p.json", plan_of(step(1, "list_files", {})))
    child = spawn(tmp_path, "run", "look", "--planner-model", planner, "--workspace", "ws",
                  delay=3)  # fmt: skip
    child.expect(r"writing the plan \d+\.\ds")
    child.sendintr()
    text, code = finish(child)
    assert code == 130, text
    assert re.search(r"interrupted; .* planexec resume [0-9a-f-]{36}", text)
    assert "Traceback" not in text


SLEEPY_EDITOR = """\
import pathlib, sys, time
pathlib.Path(sys.argv[1]).with_name("opened").write_text("yes")
time.sleep(30)  # the user presses Ctrl-C in the editor (vim users do, to leave insert mode)
"""


def ctrl_c_in_the_sleepy_editor(child: pexpect.spawn, folder: Path) -> None:
    """At the prompt, open :data:`SLEEPY_EDITOR` (``e``) and press Ctrl-C in it.

    The editor dies of it and planexec asks again: the prompt waits for the next answer.
    """
    child.sendline("e")
    for _ in range(100):  # until the editor has the file open
        if (folder / "opened").exists():
            break
        child.expect([pexpect.TIMEOUT], timeout=0.1)
    child.sendintr()  # the editor dies of it; planexec goes back to its menu
    child.expect("the editor failed")
    child.expect(r"Run this plan\?")


def test_ctrl_c_in_the_editor_is_the_editors_and_the_run_goes_on(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    editor = tmp_path / "editor.py"
    editor.write_text(SLEEPY_EDITOR)
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws",
                  EDITOR=f"{sys.executable} {editor}", TMPDIR=str(tmp_path))  # fmt: skip
    child.expect("Run this plan")
    ctrl_c_in_the_sleepy_editor(child, tmp_path)
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"


def test_ctrl_c_while_a_step_works_exits_130_and_resume_finishes_the_run(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, None, {}), step(2, "list_files", {}, [1]))))
    executor = tmp_path / "executor.json"
    executor.write_text(json.dumps([{"content": "thought [/] about it"}]))
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws", "--yes",
                  "--executor-model", f"scripted:{executor}", delay=3)  # fmt: skip
    child.expect(r"step 1 \(model\) \d+\.\ds")  # the live status of the step's model call
    child.sendintr()
    text, code = finish(child)
    assert code == 130, text
    tid = re.search(r"thread ([0-9a-f-]{36})", text).group(1)
    assert f"planexec resume {tid}" in text
    assert "Traceback" not in text and "Exception in callback" not in text
    resumed = spawn(tmp_path, "resume", tid, "--yes")
    text, code = finish(resumed)
    assert code == 0, text
    assert "thought [/] about it" in text


def test_the_status_counts_the_plan_steps_as_the_planner_streams_them(tmp_path):
    steps = [step(i, "list_files", {}, [i - 1] if i > 1 else []) for i in range(1, 4)]
    path = tmp_path / "planner.json"
    reply = {"tool_calls": [{"name": "Plan", "args": plan_of(*steps, goal="look [/] around")}]}
    path.write_text(json.dumps({"stream_chunk_chars": 20, "replies": [reply]}))
    child = spawn(tmp_path, "run", "look", "--planner-model", f"scripted:{path}",
                  "--workspace", "ws", "--yes", chunk_delay=0.15)  # fmt: skip
    child.expect(r"writing the plan \(1 step so far\) \d+\.\ds")
    child.expect(r"writing the plan \(2 steps so far\) \d+\.\ds")
    text, code = finish(child)
    assert code == 0, text
    assert text.index("2 steps so far") < text.index("Plan v1: look [/] around")


def test_ctrl_c_at_a_revised_plans_approval_does_not_claim_nothing_ran(tmp_path):
    (tmp_path / "ws" / "folder").mkdir(parents=True)
    (tmp_path / "ws" / "notes.txt").write_text("the notes")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "read_file", {"path": "folder"}))))
    planner = script(
        tmp_path / "planner.json", plan_of(step(2, "read_file", {"path": "notes.txt"}))
    )
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws",
                  "--approval", "always", "--planner-model", planner)  # fmt: skip
    child.expect("Run this plan")
    child.sendline("y")
    child.expect("revised by the replanner after failures")
    child.expect("Run this plan")
    child.sendintr()
    text, code = finish(child)
    assert code == 130, text
    ending = text[text.rindex("Run this plan") :]
    assert "nothing was run" not in ending and "✘ step 1 failed" in text
    assert re.search(r"plan v2 waits for your approval.*planexec resume [0-9a-f-]{36}", ending)


def test_the_end_summary_tells_the_time_at_the_prompt_from_the_runs(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws")
    child.expect("Run this plan")
    child.expect([pexpect.TIMEOUT], timeout=1.2)  # the user reads the plan
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    took = re.search(r"succeeded in (\d+\.\d)s \((\d+\.\d)s of it at the prompt\)", text)
    assert took and float(took.group(2)) >= 1.2 and float(took.group(1)) >= float(took.group(2))


def test_a_second_ctrl_c_still_says_how_to_resume(tmp_path):
    planner = script(tmp_path / "p.json", plan_of(step(1, "list_files", {})))
    child = spawn(tmp_path, "run", "look", "--planner-model", planner, "--workspace", "ws",
                  delay=3)  # fmt: skip
    child.expect(r"writing the plan \d+\.\ds")
    started = time.monotonic()
    child.sendintr()  # the model call runs on, on the model loop's daemon thread: no wait for it
    if child.expect([pexpect.TIMEOUT, pexpect.EOF], timeout=0.3) == 0:
        child.sendintr()  # still exiting: a second Ctrl-C changes nothing
    text, code = finish(child)
    assert time.monotonic() - started < 2.5  # the model's reply would take 3 s
    assert code == 130, text
    tid = re.search(r"thread ([0-9a-f-]{36})", text).group(1)
    assert f"planexec resume {tid}" in text and "Traceback" not in text


def test_n_rejects_asks_what_to_change_and_the_new_plan_is_shown_with_its_changes(tmp_path):
    first = plan_of(step(1, "write_file", {"path": "long.txt", "content": "long"}))
    second = plan_of(step(1, "write_file", {"path": "short.txt", "content": "short"}))
    path = tmp_path / "planner.json"
    path.write_text(json.dumps([
        {"match": "make it short", "tool_calls": [{"name": "Plan", "args": second}]},
        {"tool_calls": [{"name": "Plan", "args": first}]},
    ]))  # fmt: skip
    child = spawn(tmp_path, "run", "write something", "--planner-model", f"scripted:{path}",
                  "--workspace", "ws")  # fmt: skip
    child.expect("Run this plan")
    child.sendline("n")
    child.expect("what should change")
    child.sendline("make it short")
    child.expect(r"revising the plan|writing the plan|planned|revised")
    child.expect("Run this plan")
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    again = text[text.index("make it short") :]
    assert "Plan v2" in again and "changes from v1:" in again
    assert '~ step 1 args: {"path": "long.txt", "content": "long"}' in again
    assert again.index("changes from v1") < again.index("Run this plan")
    assert (tmp_path / "ws" / "short.txt").exists() and not (tmp_path / "ws" / "long.txt").exists()


def test_a_revision_the_same_as_the_rejected_plan_is_still_shown_as_the_new_version(tmp_path):
    same = plan_of(step(1, "write_file", {"path": "a.txt", "content": "a"}))
    planner = script(tmp_path / "planner.json", same, same)
    child = spawn(tmp_path, "run", "write a", "--planner-model", planner, "--workspace", "ws")
    child.expect("Run this plan")
    child.sendline("n")
    child.expect("what should change")
    child.sendline("shorter please")
    child.expect("Run this plan")
    child.sendline("y")
    text, code = finish(child)
    assert code == 0, text
    again = text[text.index("shorter please") :]
    assert "Plan v2" in again and "unchanged from v1" in again, again
    assert again.index("unchanged from v1") < again.index("Run this plan")


def test_the_judge_has_a_live_status_with_its_elapsed_time(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    judge = tmp_path / "judge.json"
    verdicts = [{"step": 1, "ok": True, "reason": "listed [/] fine"}]
    judge.write_text(json.dumps([{"tool_calls": [{"name": "Verdicts",
                                                  "args": {"verdicts": verdicts}}]}]))  # fmt: skip
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws", "--yes",
                  "--judge", "--evaluator-model", f"scripted:{judge}", delay=1.5)  # fmt: skip
    child.expect(r"checking the results \d+\.\ds")
    text, code = finish(child)
    assert code == 0, text
    assert re.search(r"judged the results in 1\.\d+s", text)
    assert re.search(r"succeeded in \d+\.\ds · 1 model call \(evaluator 1\)", text)


def test_show_and_resume_of_a_thread_full_of_markup_print_it_literally(tmp_path):
    (tmp_path / "ws" / "[fold]").mkdir(parents=True)
    plan = plan_of(
        {**step(1, "write_file", {"path": "a.txt", "content": "[/] x"}), "description": HOSTILE},
        {**step(2, "read_file", {"path": "[fold]"}, [1]), "description": "read [/] it"},
        goal="Write [a.txt] [/]",
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    child = spawn(tmp_path, "run", "--plan", str(plan_file), "--workspace", "ws", "--yes",
                  "--max-replans", "0")  # fmt: skip
    text, code = finish(child)
    assert code == 1, text
    assert "- step 2 [read_file] failed: '[fold]' is a folder, not a file" in text
    tid = re.search(r"thread ([0-9a-f-]{36})", text).group(1)
    shown, code = finish(spawn(tmp_path, "show", tid))
    assert code == 0 and "Traceback" not in shown, shown
    assert "Write [a.txt] [/]" in shown and "read [/] it" in shown
    for piece in ("Sum [revenue] by", "[region] [/]", "[bold]not bold[/bold]", ":smile:"):
        assert piece in shown  # the description, in a table cell that may wrap between them
    resumed, code = finish(spawn(tmp_path, "resume", tid))  # already finished: its end again
    assert code == 1 and "Traceback" not in resumed, resumed
    for screen_text in (shown, resumed):
        assert "- step 2 [read_file] failed: '[fold]' is a folder, not a file" in screen_text
