from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from planexec.cli import app
from planexec.llm.models import MISSING_KEY
from planexec.tools.sandbox import Sandbox
from tests.helpers import DEMO, plan_of, sales_plan, step

runner = CliRunner()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    return tmp_path


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def thread_of(output: str) -> str:
    return re.search(r"thread ([0-9a-f-]{36})", output).group(1)


def script(path: Path, *replies: dict) -> str:
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def test_demo_report_matches_pandas(env):
    result = invoke("demo", "--yes", "--workspace", "demo")
    assert result.exit_code == 0, result.output
    assert "recorded" in result.output and "not planned live" in result.output
    report = (env / "demo" / "output" / "report.md").read_text()
    assert (env / "demo" / "output" / "revenue_trend.png").read_bytes()[:4] == b"\x89PNG"

    raw = pd.read_csv(DEMO / "sales.csv")
    clean = raw.drop_duplicates(subset=["transaction_id"]).dropna(subset=["date", "revenue"])
    monthly = clean.groupby(pd.to_datetime(clean["date"]).dt.to_period("M"))["revenue"].sum()
    assert f"| total | {clean['revenue'].sum():,.2f} |" in report
    assert f"| rows | {len(clean):,} |" in report
    for period, value in monthly.items():
        assert f"| {period} | {value:,.2f} |" in report
    by_product = clean.groupby("product")["revenue"].sum()
    for product, value in by_product.items():
        assert f"| {product} | {value:,.2f} |" in report
    december_growth = 100 * (monthly.iloc[-1] / monthly.iloc[-2] - 1)
    assert f"| 2025-12 | {monthly.iloc[-1]:,.2f} | {december_growth:,.2f} |" in report
    assert "Direction: **up**" in report
    assert "![Sales trend report 2025](revenue_trend.png)" in report

    # the headline: formatted figures, the anomaly said where the trend is stated, cleaning told
    headline = report.split("\n\n")[1]
    change = 100 * (monthly.iloc[-1] / monthly.iloc[0] - 1)
    change_without = 100 * (monthly.iloc[-2] / monthly.iloc[0] - 1)
    assert f"totals {clean['revenue'].sum():,.2f}" in headline, headline
    assert f"The trend is up (+{change:,.2f}% from 2025-01 to 2025-12)" in headline, headline
    assert f"2025-12 is an anomaly: without it, up (+{change_without:,.2f}%)" in headline, headline
    dropped = len(raw) - len(clean)
    assert f"{dropped:,} of {len(raw):,} rows were removed in cleaning" in headline, headline
    assert not re.search(r"\d{4,}\.\d|\.\d{3,}", report), "an unformatted number"
    assert "## Data cleaning" in report
    assert f"{len(raw):,} rows read, {len(clean):,} kept." in report
    duplicates = len(raw) - len(raw.drop_duplicates(subset=["transaction_id"]))
    assert f"| {duplicates:,} | duplicate" in report, report
    # the chart: monthly revenue from the cleaned file, its axes named after the data
    shown = json.loads(invoke("show", thread_of(result.output), "--json").output)
    tools = {str(s["id"]): s["tool"] for s in shown["plan"]["steps"]}
    drawn = next(r["output"] for i, r in shown["steps"].items() if tools[i] == "generate_chart")
    assert (drawn["x_label"], drawn["y_label"]) == ("date (month)", "revenue"), drawn
    assert drawn["points"] == 12


def test_run_task_with_data_and_yes(env):
    planner = script(env / "p.json", {"tool_calls": [{"name": "Plan", "args": sales_plan()}]})
    result = invoke(
        "run",
        "Analyze sales.csv",
        "--data",
        str(DEMO / "sales.csv"),
        "--yes",
        "--planner-model",
        planner,
        "--workspace",
        "ws",
    )
    assert result.exit_code == 0, result.output
    assert "report.md" in result.output and (env / "ws" / "output" / "report.md").exists()


def test_approve_at_the_prompt_and_show_and_threads(env):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "hi"})))
    )
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", input="approve\n")
    assert result.exit_code == 0, result.output
    assert (env / "ws" / "a.txt").read_text() == "hi"
    tid = thread_of(result.output)

    shown = invoke("show", tid)
    assert shown.exit_code == 0 and "write_file" in shown.output and "succeeded" in shown.output
    as_json = json.loads(invoke("show", tid, "--json").stdout)
    assert as_json["steps"]["1"]["status"] == "succeeded" and as_json["next"] == []
    listed = invoke("threads", "--json")
    assert tid in [row["thread_id"] for row in json.loads(listed.stdout)]


def test_show_json_gives_the_chat_messages_as_json_objects(env):
    """Issue 33: ``show --json`` printed each message as its Python repr ("content='…'")."""
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "hi"})))
    )
    tid = thread_of(invoke("run", "--plan", str(plan_file), "--workspace", "ws", "--yes").output)
    shown = invoke("show", tid, "--json")
    assert shown.exit_code == 0, shown.output
    messages = json.loads(shown.stdout)["messages"]
    assert messages and all(isinstance(m, dict) for m in messages), messages
    assert [m["type"] for m in messages] == ["ai", "ai"], messages
    assert messages[0]["content"].startswith("**Plan v1**")
    assert messages[1]["content"].startswith("Step 1 (step 1) wrote a.txt")  # the answer


def test_edit_in_the_editor(env, monkeypatch):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "original"})))
    )
    editor = env / "editor.py"
    editor.write_text(
        "import json, sys\n"
        "p = json.load(open(sys.argv[1]))\n"
        "p['steps'][0]['args']['content'] = 'edited'\n"
        "json.dump(p, open(sys.argv[1], 'w'))\n"
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", input="edit\n")
    assert result.exit_code == 0, result.output
    assert (env / "ws" / "a.txt").read_text() == "edited"


def test_leaving_the_editor_without_a_change_is_no_approval(env, monkeypatch):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    monkeypatch.setenv("EDITOR", "true")  # opens and closes: nothing changed
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", input="e\nc\n")
    assert result.exit_code == 1, result.output
    assert "the plan is unchanged" in result.output and "cancelled" in result.output
    assert result.output.count("Run this plan?") == 2
    assert not (env / "ws" / "a.txt").exists()


def test_reject_with_feedback_then_approve(env):
    first = plan_of(step(1, "write_file", {"path": "long.txt", "content": "long"}))
    second = plan_of(step(1, "write_file", {"path": "short.txt", "content": "short"}))
    planner = script(
        env / "p.json",
        {"match": "make it short", "tool_calls": [{"name": "Plan", "args": second}]},
        {"tool_calls": [{"name": "Plan", "args": first}]},
    )
    result = invoke(
        "run",
        "write something",
        "--planner-model",
        planner,
        "--workspace",
        "ws",
        input="reject\nmake it short\napprove\n",
    )
    assert result.exit_code == 0, result.output
    assert (env / "ws" / "short.txt").exists() and not (env / "ws" / "long.txt").exists()


def test_unanswered_prompt_pauses_and_resume_continues(env):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "later"})))
    )
    paused = invoke("run", "--plan", str(plan_file), "--workspace", "ws", input="")
    assert paused.exit_code == 1
    assert "planexec resume" in paused.output and "Traceback" not in paused.output
    tid = thread_of(paused.output)
    assert not (env / "ws" / "a.txt").exists()
    resumed = invoke("resume", tid, "--yes", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert f"thread {tid} · workspace {env / 'ws'} · resuming" in resumed.stderr
    assert json.loads(resumed.stdout)["final"]["status"] == "succeeded"
    assert (env / "ws" / "a.txt").read_text() == "later"
    again = invoke("resume", tid)
    assert again.output.startswith(f"thread {tid} · workspace {env / 'ws'} · already finished")


def test_a_failed_run_exits_non_zero(env):
    (env / "ws" / "folder").mkdir(parents=True)
    plan_file = env / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "read_file", {"path": "folder"}))))
    result = invoke(
        "run", "--plan", str(plan_file), "--workspace", "ws", "--yes", "--max-replans", "0"
    )
    assert result.exit_code == 1, result.output
    assert "✘ step 1 failed" in result.output and "[read_file] failed" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "x", "--data", "nope.csv", "--yes"], "data file nope.csv does not exist"),
        (["run", "--plan", "missing.json"], "cannot read plan file missing.json"),
        (["show", "00000000-0000-0000-0000-000000000000"], "no run with thread id"),
        (["resume", "00000000-0000-0000-0000-000000000000"], "no run with thread id"),
        (["run", "analyse things", "--yes"], MISSING_KEY),
        (["run"], "give a TASK, or --plan"),
    ],
)
def test_user_errors_are_one_line(env, args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 3


def test_invalid_plan_file_is_explained(env):
    bad = env / "bad.json"
    bad.write_text(json.dumps(plan_of(step(1, "no_such_tool"), step(2, "read_file", {}, [1]))))
    result = invoke("run", "--plan", str(bad))
    assert result.exit_code == 2
    assert "unknown tool 'no_such_tool'" in result.output and "Traceback" not in result.output
    (env / "broken.json").write_text("{oops")
    assert "not valid JSON" in invoke("run", "--plan", "broken.json").output


def test_postgres_urls_are_recognised_without_a_server(env):
    result = invoke("show", "x", "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert result.exit_code == 2 and "Traceback" not in result.output


def teardown_module():
    shutil.rmtree(Path("planexec-runs"), ignore_errors=True)


def test_json_output_stays_clean_when_a_tool_prints(env, monkeypatch):
    from langchain_core.tools import tool

    from planexec import graph
    from planexec.runs import request as run_request
    from planexec.tools import default_registry

    @tool
    def chatty(text: str) -> str:
        """Print to stdout, then return the text."""
        print("chatter on stdout")
        return text

    def registry():
        reg = default_registry()
        reg.register(chatty)
        return reg

    monkeypatch.setattr(graph, "default_registry", registry)
    monkeypatch.setattr(run_request, "default_registry", registry)
    plan_file = env / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "chatty", {"text": "quiet"}))))
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["steps"]["1"]["output"] == "quiet"
    assert "chatter on stdout" in result.stderr


def test_runs_persist_in_postgres_and_resume_from_it(env, postgres_url):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "pg.txt", "content": "in postgres"})))
    )
    paused = invoke(
        "run", "--plan", str(plan_file), "--workspace", "ws", "--db", postgres_url, input=""
    )
    assert paused.exit_code == 1
    tid = thread_of(paused.output)
    resumed = invoke("resume", tid, "--yes", "--db", postgres_url)
    assert resumed.exit_code == 0, resumed.output
    assert (env / "ws" / "pg.txt").read_text() == "in postgres"
    listed = json.loads(invoke("threads", "--db", postgres_url, "--json").stdout)
    assert tid in [row["thread_id"] for row in listed]


def test_an_edit_that_is_not_json_is_refused_and_asked_again(env, monkeypatch):
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(plan_of(step(1, "write_file", {"path": "a.txt", "content": "x"})))
    )
    editor = env / "break.py"
    editor.write_text("import sys\nopen(sys.argv[1], 'w').write('{oops')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", input="edit\ncancel\n")
    assert "not valid JSON" in result.output and "Traceback" not in result.output
    assert result.exit_code == 1 and "cancelled" in result.output
    assert not (env / "ws" / "a.txt").exists()


@pytest.mark.parametrize("tid", ["/", "..", ".", "", "a/b", "../../tmp", "/etc"])
def test_thread_ids_that_are_paths_are_refused(env, tid):
    plan_file = env / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "read_file", {"path": "etc/hostname"}))))
    result = invoke("run", "--plan", str(plan_file), "--thread-id", tid, "--yes")
    assert result.exit_code == 2, result.output
    assert "thread id" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (Sandbox.at().root / "threads").exists()  # where a run's folder would be


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workspace", ""], "empty"),
        (["--workspace", "."], "overlap"),  # planexec's outputs folder (PLANEXEC_OUTPUTS_DIR)
        (["--workspace", "outputs"], "overlap"),
        (["--workspace", "ws", "--db", "ws/runs.sqlite"], "inside the workspace"),
    ],
)
def test_a_workspace_holding_planexecs_own_files_is_refused(env, extra, message):
    plan_file = env / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "read_file", {"path": "plan.json"}))))
    result = invoke("run", "--plan", str(plan_file), *extra, "--yes")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 2
    assert not (env / "ws" / "runs.sqlite").exists()


def test_spilled_outputs_stay_outside_the_workspace_and_show_prints_them(env):
    (env / "ws").mkdir()
    text = "line of a big file\n" * 1000
    (env / "ws" / "big.txt").write_text(text)
    plan_file = env / "plan.json"
    plan_file.write_text(
        json.dumps(
            plan_of(
                step(1, "read_file", {"path": "big.txt"}),
                step(2, "write_file", {"path": "copy.txt", "content": "$1.content"}, [1]),
            )
        )
    )
    result = invoke("run", "--plan", str(plan_file), "--workspace", "ws", "--yes")
    assert result.exit_code == 0, result.output
    tid = thread_of(result.output)
    assert (env / "ws" / "copy.txt").read_text() == text
    assert sorted(p.name for p in (env / "ws").rglob("*")) == ["big.txt", "copy.txt"]
    shown = json.loads(invoke("show", tid, "--json").stdout)
    assert shown["steps"]["1"]["output"] is None
    spill = shown["steps"]["1"]["output_file"]
    assert (env / "outputs" / f"{spill['id']}.json").exists()
    printed = invoke("show", tid, "--output", "1")
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout)["content"] == text
    assert json.loads(invoke("show", tid, "--output", "2").stdout)["path"] == "copy.txt"
    missing = invoke("show", tid, "--output", "9")
    assert missing.exit_code == 2 and "has no step 9" in missing.output
