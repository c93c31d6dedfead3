"""The CLI's options and defaults do what they say; the package feels finished."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

import planexec
from planexec.cli import app
from planexec.tools.sandbox import Sandbox
from tests.helpers import DEMO, ROOT, plan_of, step

runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    return tmp_path


def invoke(*args: str, input: str | None = None, **env: str):
    return runner.invoke(app, list(args), input=input, env=env or None)


def python(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    src = str(Path(planexec.__file__).parents[1])
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env={"PYTHONPATH": src,
        "PATH": "/usr/bin:/bin"}, timeout=120, **kwargs,
    )  # fmt: skip


def test_help_loads_neither_the_graph_nor_pandas():
    heavy = ("pandas", "langgraph", "langchain_core", "planexec.graph", "planexec.context")
    probe = f"import sys, planexec, planexec.cli\nprint([m for m in {heavy!r} if m in sys.modules])"
    assert python("-c", probe).stdout.strip() == "[]"
    helped = python("-m", "planexec", "--help")
    assert helped.returncode == 0 and "run" in helped.stdout and "<bool>" not in helped.stdout
    assert "-y, --yes" in python("-m", "planexec", "run", "--help").stdout
    assert python("-m", "planexec", "--version").stdout.strip() == f"planexec {version('planexec')}"
    assert planexec.__version__ == version("planexec")
    assert planexec.Runs.__name__ == "Runs"  # names still load, on first use


def test_license_and_gitignore():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "planexec-demo/" in ignored and "planexec-runs/" in ignored


def test_a_plan_reading_a_file_the_workspace_lacks_says_which_and_how_to_copy_it(env):
    shutil.copy(DEMO / "sales_plan.json", env / "sales_plan.json")
    result = invoke("run", "--plan", "sales_plan.json", "--yes")
    assert result.exit_code == 2, result.output
    assert "sales.csv (step 1)" in result.output and "--data sales.csv" in result.output
    assert "OPENAI_API_KEY" not in result.output and len(result.output.strip().splitlines()) == 1
    assert json.loads(invoke("threads", "--json").stdout) == []  # no run was made


def test_data_is_repeated_per_file_and_a_file_given_as_the_task_is_refused(env):
    (env / "a.csv").write_text("x\n1\n")
    (env / "b.csv").write_text("y\n2\n")
    result = invoke("run", "--data", "a.csv", "b.csv")
    assert result.exit_code == 2 and "b.csv is a file, not a task" in result.output
    assert "repeat --data" in invoke("run", "--help").output


def test_a_thread_id_in_use_is_refused_before_any_file_is_copied(env):
    (env / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    assert invoke("run", "--plan", "plan.json", "--yes", "--thread-id", "t-1").exit_code == 0
    (env / "new.csv").write_text("z\n")
    again = invoke("run", "--plan", "plan.json", "--yes", "--thread-id", "t-1", "--data", "new.csv")
    assert again.exit_code == 2 and "already exists" in again.output
    assert not (Sandbox.at().workspace_path(None, "t-1") / "new.csv").exists()


def test_threads_keeps_ids_whole_and_summaries_end_at_the_terminal_width(env):
    content = "a long line of text " * 20
    plan = plan_of(step(1, "write_file", {"path": "a.txt", "content": content}),
                   step(2, "read_file", {"path": "a.txt"}, [1]))  # fmt: skip
    (env / "plan.json").write_text(json.dumps(plan))
    result = invoke("run", "--plan", "plan.json", "--yes", COLUMNS="70")
    assert result.exit_code == 0, result.output
    done = [line for line in result.output.splitlines() if "✔ step 2 done" in line]
    assert len(done) == 1 and len(done[0]) <= 70 and done[0].endswith("…")
    tid = re.search(r"thread ([0-9a-f-]{36})", result.output).group(1)
    listed = invoke("threads", COLUMNS="60").output
    assert any(tid in line for line in listed.splitlines())


def test_show_prints_the_answer_and_files_and_its_json_survives_a_closed_pipe(env):
    content = "a line of text\n" * 10_000  # more than a pipe holds
    (env / "plan.json").write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "out.txt", "content": content})))
    )
    result = invoke("run", "--plan", "plan.json", "--yes", "--workspace", "ws")
    tid = re.search(r"thread ([0-9a-f-]{36})", result.output).group(1)
    shown = invoke("show", tid).output
    assert "succeeded" in shown and "→ " in shown and "out.txt" in shown
    src = str(Path(planexec.__file__).parents[1])
    piped = subprocess.run(
        f"{sys.executable} -m planexec show {tid} --json | head -c 10",
        shell=True, capture_output=True, text=True, cwd=env, timeout=120,
        env={"PYTHONPATH": src, "PLANEXEC_DB": str(env / "runs.sqlite"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert piped.stdout == '{\n "thread_'[:10] and piped.stderr == ""


def test_the_offline_demo_says_revising_needs_a_model_before_asking(env):
    result = invoke("demo", "--workspace", "demo", input="r\nc\n")
    before = result.output[: result.output.index("Run this plan?")]
    assert "reject is not offered: revising a plan needs a planner model" in before
    assert "r = reject" not in result.output
    assert "cancelled" in result.output and result.exit_code == 1


def test_a_narrow_terminal_shows_each_step_as_a_block_not_a_crushed_table(env):
    shutil.copy(DEMO / "sales.csv", env / "sales.csv")
    result = invoke("run", "--plan", str(DEMO / "sales_plan.json"), "--data", "sales.csv",
                    "--workspace", "ws", "--yes", COLUMNS="40")  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = result.output[: result.output.index("approved (--yes)")]
    assert "┃" not in shown and "│" not in shown  # no table
    for line in ("1. load_csv", "3. calculate_stats · after 2", "6. write_report · after 2-5"):
        assert line in shown.splitlines()
    wide = invoke("show", re.search(r"thread (\S+)", result.output).group(1), COLUMNS="120")
    assert "┃ id ┃ tool" in wide.output  # a wide terminal keeps the table


def test_data_never_overwrites_a_file_and_a_file_already_in_the_workspace_is_fine(env):
    (env / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    for folder, content in (("a", "x\n1\n"), ("b", "y\n2\n"), ("ws", "mine\n")):
        (env / folder).mkdir()
        (env / folder / "s.csv").write_text(content)
    run = ("run", "--plan", "plan.json", "--yes", "--workspace")
    twice = invoke(*run, "new", "--data", "a/s.csv", "--data", "b/s.csv")
    assert twice.exit_code == 2 and "a/s.csv and b/s.csv have the same name" in twice.output
    assert not (env / "new").exists()
    over = invoke(*run, "ws", "--data", "a/s.csv")
    assert over.exit_code == 2 and "already has a different s.csv" in over.output
    assert (env / "ws" / "s.csv").read_text() == "mine\n"  # the user's file is kept
    assert json.loads(invoke("threads", "--json").stdout) == []  # no run was made
    inside = invoke(*run, "ws", "--data", "ws/s.csv")
    assert inside.exit_code == 0, inside.output
    (env / "same.csv").write_text("mine\n")  # the same content: nothing is lost
    assert invoke(*run, "ws", "--data", "same.csv").exit_code == 0


def test_the_missing_file_advice_works_when_pasted(env):
    plan = plan_of(step(1, "read_file", {"path": "my notes.txt"}),
                   step(2, "read_file", {"path": "data/sales.csv"}))  # fmt: skip
    (env / "plan.json").write_text(json.dumps(plan))
    result = invoke("run", "--plan", "plan.json", "--yes", "--workspace", "ws")
    assert result.exit_code == 2, result.output
    assert "--data 'my notes.txt'" in result.output  # a shell takes it as one file
    assert "--data data/sales.csv" not in result.output  # --data would copy it to ws/sales.csv
    assert f"put data/sales.csv at {env / 'ws' / 'data' / 'sales.csv'}" in result.output


def test_threads_leaves_room_for_the_task_on_an_80_column_terminal(env):
    (env / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}), goal="x")))
    assert (
        invoke("run", "look around the [workspace]", "--plan", "plan.json", "--yes").exit_code == 0
    )
    listed = invoke("threads", COLUMNS="80").output
    assert "look around" in listed and max(map(len, listed.splitlines()[1:])) <= 80


def test_a_reader_that_leaves_early_ends_every_listing_quietly_like_a_shell_tool(env):
    content = "a line of text\n" * 10_000  # more than a pipe holds, in the plan's args
    (env / "plan.json").write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "out.txt", "content": content})))
    )
    result = invoke("run", "--plan", "plan.json", "--yes", "--workspace", "ws")
    tid = re.search(r"thread ([0-9a-f-]{36})", result.output).group(1)
    src = str(Path(planexec.__file__).parents[1])
    for command in (f"show {tid}", f"show {tid} --json", "threads"):
        piped = subprocess.run(
            ["bash", "-c", f"{sys.executable} -m planexec {command} | head -c 1; "
             "echo \" ${PIPESTATUS[0]}\""],
            capture_output=True, text=True, cwd=env, timeout=120,
            env={"PYTHONPATH": src, "PLANEXEC_DB": str(env / "runs.sqlite"),
                 "PATH": "/usr/bin:/bin", "COLUMNS": "100"},
        )  # fmt: skip
        assert piped.stderr == "", (command, piped.stderr)
        # 128 + SIGPIPE, as a shell tool; a short listing may be written before the reader left
        expected = {" 0\n", " 141\n"} if command == "threads" else {" 141\n"}
        assert piped.stdout[1:] in expected, (command, piped.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-replans", "-1"], "max_replans: Input should be greater than or equal to 0"),
        (["--approval", "bogus"], "approval: Input should be 'always', 'first' or 'never'"),
        (["--max-parallel", "0"], "max_parallel_steps: Input should be greater than or equal to 1"),
        (["--step-timeout", "nan"], "step_timeout: Input should be a finite number"),
    ],
)
def test_choices_and_ranges_are_refused_before_anything_is_made(env, args, message):
    (env / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    result = invoke("run", "--plan", "plan.json", "--yes", *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (Sandbox.at().root / "threads").exists()  # where a run's folder would be
    assert json.loads(invoke("threads", "--json").stdout) == []


def test_threads_leaves_room_for_the_task_when_a_run_waits_for_approval(env):
    (env / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}), goal="x")))
    waiting = invoke("run", "look around the [workspace]", "--plan", "plan.json", input="")
    assert waiting.exit_code == 1 and "paused" in waiting.output, waiting.output
    listed = invoke("threads", COLUMNS="80").output
    assert "waiting" in listed and "look around" in listed, listed
    assert max(map(len, listed.splitlines()[1:])) <= 80


def test_options_in_help_name_what_they_take_not_a_python_type():
    for command in ("run", "resume", "show", "threads", "plans", "demo"):
        helped = invoke(command, "--help").output
        options = [line for line in helped.splitlines() if line.strip().startswith("-")]
        assert not [line for line in options if "<" in line.split("  ")[1]], (command, helped)
    assert "--db PATH|URL" in invoke("run", "--help").output
    assert "--thread-id ID" in invoke("run", "--help").output
    assert "--limit N" in invoke("threads", "--help").output
