"""Who decided, at the CLI: the local user is recorded with every answer, and ``show`` lists it.

The CLI vouches for the local OS user (the account the process runs as, ``pwd``; here faked to
be the ``LOGNAME`` a test sets, since the real account is one): every run it
starts or resumes carries ``{"id": USER, "source": "cli"}`` as its caller, and the approval
records that identity in the thread's ``decisions``, which ``planexec show`` (and ``--json``)
lists. The runs API does the same for any ``caller=`` it is given.
"""

from __future__ import annotations

import json
import os
import pwd
import re
from datetime import datetime
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from planexec import Runs, new_run
from planexec.cli import app
from planexec.storage.persistence import sqlite_saver
from tests.helpers import plan_of, step

runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("LOGNAME", "alice")
    # the OS account the CLI reads (pwd), faked: each test names it with LOGNAME
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: SimpleNamespace(pw_name=os.environ["LOGNAME"]))
    (tmp_path / "plan.json").write_text(json.dumps(plan_of(step(1, "list_files", {}))))
    return tmp_path


def invoke(*args: str, input: str | None = None, **env: str):
    return runner.invoke(app, list(args), input=input, env=env or None)


def thread_of(output: str) -> str:
    found = re.search(r"thread ([0-9a-f-]{36})", output)
    assert found, output
    return found.group(1)


def decisions_of(tid: str) -> list[dict]:
    shown = invoke("show", tid, "--json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)["decisions"]


def test_yes_records_the_local_user_and_show_lists_the_decision(env):
    result = invoke("run", "--plan", "plan.json", "--yes", "--workspace", "ws")
    assert result.exit_code == 0, result.output
    assert "approved (--yes) by alice (cli)" in result.output, result.output
    tid = thread_of(result.output)

    [decision] = decisions_of(tid)
    assert decision["action"] == "approve" and decision["kind"] == "plan"
    assert decision["by"] == {"id": "alice", "source": "cli"}
    assert decision["version"] == 1 and len(decision["digest"]) >= 12
    assert datetime.fromisoformat(decision["at"]).utcoffset() is not None  # UTC, with offset

    shown = invoke("show", tid, COLUMNS="160")
    assert shown.exit_code == 0, shown.output
    table = shown.output[shown.output.index("decisions") :]
    row = next(line for line in table.splitlines() if "alice" in line)
    assert "cli" in row and "approve" in row and "v1" in row, table
    assert decision["digest"][:8] in row and decision["at"][:10] in row, table


def test_an_answer_at_the_prompt_says_who_approved(env):
    result = invoke("run", "--plan", "plan.json", "--workspace", "ws", input="y\n")
    assert result.exit_code == 0, result.output
    assert "approved by alice (cli)" in result.output, result.output
    assert decisions_of(thread_of(result.output))[-1]["by"] == {"id": "alice", "source": "cli"}


def test_a_cancel_is_recorded_with_its_reason(env):
    result = invoke("run", "--plan", "plan.json", "--workspace", "ws", input="c\n")
    assert "approved" not in result.output, result.output
    [decision] = decisions_of(thread_of(result.output))
    assert decision["action"] == "cancel" and decision["by"]["id"] == "alice"
    assert decision["feedback"] == "cancelled at the prompt"
    shown = invoke("show", thread_of(result.output), COLUMNS="160").output
    assert "cancelled at the prompt" in shown and "cancel" in shown, shown


def test_resume_records_who_resumed_not_who_started(env):
    first = invoke("run", "--plan", "plan.json", "--workspace", "ws", input="")
    assert first.exit_code == 1 and "paused" in first.output, first.output
    tid = thread_of(first.output)
    assert decisions_of(tid) == []  # nobody answered yet: the key is there, empty

    resumed = invoke("resume", tid, "--yes", LOGNAME="bob")
    assert resumed.exit_code == 0, resumed.output
    assert "by bob (cli)" in resumed.output, resumed.output
    assert [d["by"] for d in decisions_of(tid)] == [{"id": "bob", "source": "cli"}]


def test_the_runs_api_passes_its_caller_to_every_run_it_starts_or_resumes(tmp_path):
    plan = plan_of(step(1, "list_files", {}))
    with sqlite_saver(tmp_path / "runs.sqlite") as saver:
        runs = Runs(saver, caller={"id": "carol", "source": "cli"})
        request = new_run(plan=plan, workspace=tmp_path / "ws")
        waiting = runs.start(request)
        assert waiting.request is not None
        done = runs.resume(request.thread_id, {"action": "approve"})
        assert done.status == "succeeded"
        [decision] = done.values["decisions"]
        assert decision["by"] == {"id": "carol", "source": "cli"}


def test_a_refused_answer_is_listed_with_its_reason_and_another_user_approves(env):
    first = invoke("run", "--plan", "plan.json", "--workspace", "ws", input="y\n",
                   PLANEXEC_APPROVERS="bob")  # fmt: skip
    assert "alice may not approve: not an approver" in first.output, first.output
    assert "approved" not in first.output.replace("approved plan", ""), first.output
    tid = thread_of(first.output)

    second = invoke("resume", tid, "--yes", LOGNAME="bob", PLANEXEC_APPROVERS="bob")
    assert second.exit_code == 0 and "approved (--yes) by bob (cli)" in second.output

    decisions = decisions_of(tid)
    assert [(d["action"], d["by"]["id"]) for d in decisions] == [
        ("refused", "alice"),
        ("approve", "bob"),
    ]
    shown = invoke("show", tid, COLUMNS="200").output
    refused = next(line for line in shown.splitlines() if "refused" in line)
    assert "alice (cli)" in refused and "not an approver" in refused, shown


def test_an_answer_to_a_failed_step_is_listed_with_its_step(env):
    (env / "ws" / "folder").mkdir(parents=True)  # reading a folder fails
    failing = {**step(1, "read_file", {"path": "folder"}), "on_failure": "ask"}
    (env / "ask.json").write_text(json.dumps(plan_of(failing)))
    result = invoke("run", "--plan", "ask.json", "--workspace", "ws", input="y\ns\n")
    tid = thread_of(result.output)
    skipped = [d for d in decisions_of(tid) if d.get("kind") == "step_failure"]
    assert [(d["action"], d["step"], d["by"]["id"]) for d in skipped] == [("skip", 1, "alice")]
    shown = invoke("show", tid, COLUMNS="160").output
    assert any("skip (step 1)" in line and "alice" in line for line in shown.splitlines()), shown


def test_a_given_plan_records_who_started_it_so_another_approver_can_approve(env):
    """``run --plan`` seeds the plan (intake never runs): the local caller who asks for its
    first approval is its starter, so maker-checker can tell the starter from an approver."""
    (env / "write.json").write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "out.txt", "content": "hi"})))
    )
    rules = {"PLANEXEC_APPROVERS": "alice,bob", "PLANEXEC_SEPARATE_APPROVER": "true"}
    result = invoke("run", "--plan", "write.json", "--yes", "--workspace", "ws", **rules)
    assert "alice started this run" in result.output, result.output  # her own: refused
    tid = thread_of(result.output)
    with Runs.open(str(env / "runs.sqlite")) as runs:
        assert runs.get(tid).values["started_by"] == {"id": "alice", "source": "cli"}

    resumed = invoke("resume", tid, "--yes", LOGNAME="bob", **rules)
    assert resumed.exit_code == 0, resumed.output
    assert "approved (--yes) by bob (cli)" in resumed.output, resumed.output
    assert (env / "ws" / "out.txt").read_text() == "hi"
