"""``planexec eval`` on the shipped dataset, and the same target and evaluators in langsmith.

The shipped dataset (examples/eval/sales.jsonl: the demo's tasks) runs against the scripted
planner (examples/eval/planner.json) with its steps replayed from examples/eval/recordings, as
CI runs it: a table, JSON, thresholds as exit codes, no tool call on replay, the same step
outputs as a live run, and a changed argument reported at its step. Offline throughout.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planexec.cli import app
from planexec.recording.recorder import part_name
from tests.helpers import DEMO, EXAMPLES

EVAL = EXAMPLES / "eval"
DATASET = EVAL / "sales.jsonl"
PLANNER = EVAL / "planner.json"
RECORDINGS = EVAL / "recordings"
IDS = ["trend-report", "revenue-by-product", "monthly-chart"]


@pytest.fixture(autouse=True)
def _scripted_planner_allowed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(EXAMPLES))
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COLUMNS", "120")


def evaluate(*args: str, planner: Path = PLANNER, dataset: Path = DATASET) -> tuple[int, str]:
    """Run ``planexec eval`` on the shipped dataset; return its exit code and output."""
    done = CliRunner().invoke(
        app, ["eval", str(dataset), "--planner-model", f"scripted:{planner}", *args]
    )
    return done.exit_code, done.output


def report(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(
        app, ["eval", str(DATASET), "--planner-model", f"scripted:{PLANNER}", "--json", *args]
    )
    assert done.exit_code == 0, done.output
    data: dict[str, Any] = json.loads(done.stdout)  # the lines for people went to stderr
    return data


def files_made(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and p.name != "sales.csv")


def test_the_shipped_dataset_passes_replayed_with_no_tool_call(tmp_path: Path) -> None:
    code, output = evaluate("--replay", str(RECORDINGS), "--workspace", str(tmp_path / "ws"))
    assert code == 0, output
    for ident in IDS:
        assert ident in output
    assert "pass rate 100% (3 of 3)" in output
    assert "met: --min pass_rate=1 (got 1)" in output
    # the tools write a chart, a report and a Parquet file when they run: on replay none ran
    assert files_made(tmp_path / "ws") == []


def test_replayed_step_outputs_are_the_live_runs(tmp_path: Path) -> None:
    live = report("--workspace", str(tmp_path / "live"))
    replayed = report("--replay", str(RECORDINGS), "--workspace", str(tmp_path / "replay"))
    assert "revenue_trend.png" in files_made(tmp_path / "live")
    assert files_made(tmp_path / "replay") == []
    outputs = {e["id"]: e["outputs"] for e in live["examples"]}
    for example in replayed["examples"]:
        assert example["passed"], example["scores"]
        assert example["outputs"]["step_outputs"] == outputs[example["id"]]["step_outputs"]
        assert example["outputs"]["trajectory"] == outputs[example["id"]]["trajectory"]
    totals = replayed["totals"]
    assert totals["examples"] == 3 and totals["pass_rate"] == 1.0
    assert totals["model_calls"] == 3 and totals["tokens"] > 0
    assert replayed["thresholds"] == [{"threshold": "--min pass_rate=1", "value": 1.0, "met": True}]
    first = replayed["examples"][0]
    assert first["scores"]["trajectory"]["score"] == 1
    assert first["outputs"]["planned_tools"][:2] == ["load_csv", "clean_data"]


def test_a_missed_threshold_exits_1_and_a_wrong_one_2(tmp_path: Path) -> None:
    code, output = evaluate(
        "--replay", str(RECORDINGS), "--min", "trajectory=1", "--max", "model_calls=2"
    )
    assert code == 1, output
    assert "met: --min trajectory=1 (got 1)" in output
    assert "missed: --max model_calls=2 (got 3)" in output
    code, output = evaluate("--replay", str(RECORDINGS), "--min", "trajectry=1")
    assert code == 2, output
    assert "--min trajectry=1: write NAME=NUMBER with NAME one of" in output
    code, output = evaluate("--record", str(tmp_path), "--replay", str(RECORDINGS))
    assert code == 2 and "not both" in output


def test_a_changed_argument_is_reported_at_its_step(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    script = json.loads(PLANNER.read_text())
    chart = script["replies"][2]["tool_calls"][0]["args"]["steps"][2]["generate_chart"]
    chart["title"] = "Revenue by month"
    changed = tmp_path / "planner.json"
    changed.write_text(json.dumps(script))
    # the recorded planner replies answer the recorded prompts: a new wording asks the model
    dataset = tmp_path / "sales.jsonl"
    asked = "Chart the monthly revenue in sales.csv"
    dataset.write_text(DATASET.read_text().replace(asked, asked + ", as a line chart"))
    code, output = evaluate("--replay", str(RECORDINGS), planner=changed, dataset=dataset)
    assert code == 1, output
    assert "pass rate 66.6% (2 of 3)" in output  # floored, never rounded up
    line = next(x for x in output.splitlines() if x.startswith("monthly-chart final_status"))
    assert "step 3 [generate_chart]" in line
    assert "title" in line and "Revenue by month" in line and "Monthly revenue 2025" in line


def test_a_bad_dataset_line_runs_nothing(tmp_path: Path) -> None:
    dataset = tmp_path / "bad.jsonl"
    lines = DATASET.read_text().splitlines()
    lines.insert(1, json.dumps({"inputs": {"task": "t", "data": ["../../etc/passwd"]}}))
    dataset.write_text("\n".join(lines))
    done = CliRunner().invoke(app, ["eval", str(dataset), "--workspace", str(tmp_path / "ws")])
    assert done.exit_code == 2, done.output
    assert f"dataset {dataset}, line 2: inputs.data.0: '../../etc/passwd' is outside" in " ".join(
        done.output.split()
    )
    assert not (tmp_path / "ws").exists()


def examples_and_target(**target: Any) -> tuple[list[Any], Any]:
    from planexec.evaluation import EvalTarget, langsmith_example, load_dataset
    from planexec.recording import Recording

    examples = [langsmith_example(e) for e in load_dataset(DATASET)]
    options = {"planner_model": f"scripted:{PLANNER}"}
    return examples, EvalTarget(
        options=options, recording=Recording(RECORDINGS, "replay"), **target
    )


def test_langsmith_evaluate_runs_the_target_and_evaluators_offline(tmp_path: Path) -> None:
    from langsmith import evaluate as ls_evaluate

    from planexec.evaluation import DEFAULT_EVALUATORS, offline_client

    examples, target = examples_and_target(workspace_root=tmp_path)
    results = ls_evaluate(
        target,
        data=examples,
        evaluators=list(DEFAULT_EVALUATORS),
        upload_results=False,
        client=offline_client(),
        max_concurrency=2,
    )
    rows = list(results)
    assert len(rows) == 3
    for row in rows:
        scores = {r.key: r.score for r in row["evaluation_results"]["results"]}
        assert scores["trajectory"] == 1 and scores["final_status"] == 1, scores
        assert scores["answer_facts"] == 1 and scores["plan_valid_first_time"] == 1
        assert row["run"].outputs["status"] == "succeeded"


EVALUATED = """
import sys
from langsmith import evaluate
from langchain_core.tracers.langchain import wait_for_all_tracers
from planexec.evaluation import DEFAULT_EVALUATORS
from tests.integration.test_evaluation import examples_and_target
examples, target = examples_and_target(upload=sys.argv[2] == "traced")
rows = list(evaluate(target, data=examples[:1], evaluators=list(DEFAULT_EVALUATORS),
                     upload_results=False))
assert rows[0]["run"].outputs["status"] == "succeeded", rows[0]["run"].outputs
wait_for_all_tracers()
"""


def test_the_target_turns_tracing_off_when_results_stay_here(tmp_path: Path) -> None:
    from tests.integration.test_tracing import sent_to_langsmith

    env = {"PLANEXEC_SCRIPTED_DIR": str(EXAMPLES), "PLANEXEC_WORKSPACE_ROOT": str(tmp_path)}
    quiet = sent_to_langsmith(EVALUATED.replace("sys.argv[2]", '"off"'), tmp_path, env)
    assert b"load_csv" not in quiet and b"planner" not in quiet, quiet[:500]
    # the same run with tracing left on is seen by the endpoint: the check can fail
    traced = sent_to_langsmith(EVALUATED.replace("sys.argv[2]", '"traced"'), tmp_path, env)
    assert b"planner" in traced


def test_the_shipped_recordings_are_plain_reviewable_files() -> None:
    files = sorted(RECORDINGS.rglob("*.json"))
    assert files, "record them with: planexec eval ... --record examples/eval/recordings"
    for path in files:
        text = path.read_text(encoding="utf-8")
        json.loads(text)
        assert "/tmp/" not in text and str(Path.home()) not in text
    assert sum(p.stat().st_size for p in files) < 200_000


def test_tools_come_as_run_takes_them_and_keep_the_planners_names(tmp_path: Path, monkeypatch):
    from tests.mcp_servers.running import stdio_entry

    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    mcp = tmp_path / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"notes": stdio_entry("notes")}}))
    steps = [{"notes__search": {"query": "milk"}}, {"notes__read_note": {"title": "groceries"}}]
    plan = {"goal": "Find the note on milk", "steps": steps}
    planner = tmp_path / "planner.json"
    planner.write_text(json.dumps({"replies": [{"tool_calls": [{"name": "Plan", "args": plan}]}]}))
    dataset = tmp_path / "notes.jsonl"
    expected = {"tools": ["notes__search", "notes__read_note"], "max_model_calls": 1}
    dataset.write_text(
        json.dumps({"inputs": {"task": "Read the note on milk"}, "outputs": expected})
    )
    args = ["--mcp", str(mcp), "--record", str(tmp_path / "rec")]
    code, output = evaluate(*args, planner=planner, dataset=dataset)
    assert code == 0, output
    (own,) = (tmp_path / "rec").iterdir()  # the example's own (no id: named by its inputs)
    assert own.name.startswith("inputs-") and (own / "steps").is_dir()
    code, output = evaluate(
        "--mcp", str(mcp), "--replay", str(tmp_path / "rec"), planner=planner, dataset=dataset
    )
    assert code == 0, output


def test_python_tools_from_the_command_line(tmp_path: Path) -> None:
    module = EXAMPLES / "your_tools.py"
    task = "What is my portfolio worth? I hold 10 ACME. Save the figure to portfolio.txt."
    replies = EXAMPLES / "your_tools_replies.json"
    data = tmp_path / "portfolio.jsonl"
    outputs = {"tools": ["quote", "position_value", "price_history", "change_pct", "save_note"],
               "facts": ["1255.0 USD", "25.5%"], "max_model_calls": 2}  # fmt: skip
    data.write_text(json.dumps({"inputs": {"task": task}, "outputs": outputs}))
    done = CliRunner().invoke(app, [
        "eval", str(data), "--tools", f"{module}:portfolio_tools",
        "--planner-model", f"scripted:{replies}", "--executor-model", f"scripted:{replies}",
    ])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "pass rate 100% (1 of 1)" in done.output


def plan_reply(task: str, *steps: dict[str, Any]) -> dict[str, Any]:
    plan = {"goal": task, "steps": list(steps)}
    return {"match": f"Task: {task}", "tool_calls": [{"name": "Plan", "args": plan}]}


def scripted(folder: Path, *replies: dict[str, Any]) -> Path:
    path = folder / "planner.json"
    path.write_text(json.dumps({"replies": list(replies)}))
    return path


def two_examples(tmp_path: Path, *, ids: bool) -> tuple[list[dict[str, Any]], Path]:
    """Write two examples loading a sales.csv of their own (2 and 3 rows); return the rows and
    the planner's replies (one for each task; without ids both examples have the same task)."""
    rows = []
    for name, count in (("A", 2), ("B", 3)):
        (tmp_path / name).mkdir()
        lines = "".join(f"2025-01-0{i + 1},{10 * (i + 1)}\n" for i in range(count))
        (tmp_path / name / "sales.csv").write_text("date,revenue\n" + lines)
        task = f"Load file {name}" if ids else "Load the file"
        rows.append({**({"id": name} if ids else {}),
                     "inputs": {"task": task, "data": [f"{name}/sales.csv"]},
                     "outputs": {"facts": [f'"rows": {count}']}})  # fmt: skip
    load = {"load_csv": "sales.csv"}
    tasks = ("Load file A", "Load file B") if ids else ("Load the file", "Load")
    return rows, scripted(tmp_path, *(plan_reply(t, load) for t in tasks))


def write_rows(dataset: Path, rows: list[dict[str, Any]], before: str = "") -> Path:
    dataset.write_text(before + "".join(json.dumps(r) + "\n" for r in rows))
    return dataset


def test_each_example_replays_its_own_recording(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    rows, planner = two_examples(tmp_path, ids=True)
    dataset = write_rows(tmp_path / "ds.jsonl", rows)
    recorded = tmp_path / "rec"
    live = report_of(dataset, planner, "--record", str(recorded))
    assert sorted(p.name for p in recorded.iterdir()) == [part_name("A"), part_name("B")]
    replayed = report_of(dataset, planner, "--replay", str(recorded))
    for done in (live, replayed):
        assert [e["passed"] for e in done["examples"]] == [True, True], done["examples"]
    assert replayed["recording"]["tool_calls_replayed"] == 2


def test_examples_without_ids_keep_their_recordings_when_lines_move(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    rows, planner = two_examples(tmp_path, ids=False)
    dataset = write_rows(tmp_path / "ds.jsonl", rows)
    recorded = tmp_path / "rec"
    live = report_of(dataset, planner, "--record", str(recorded))
    assert [e["passed"] for e in live["examples"]] == [True, True], live["examples"]
    write_rows(dataset, list(reversed(rows)), before="\n")  # the lines moved
    replayed = report_of(dataset, planner, "--replay", str(recorded))
    assert [e["passed"] for e in replayed["examples"]] == [True, True], replayed["examples"]
    assert replayed["recording"]["tool_calls_replayed"] == 2


def report_of(dataset: Path, planner: Path, *args: str) -> dict[str, Any]:
    code, output = evaluate("--json", "--max-concurrency", "1", *args, planner=planner,
                            dataset=dataset)  # fmt: skip
    assert code in (0, 1), output
    data: dict[str, Any] = json.JSONDecoder().raw_decode(output[output.index("{\n") :])[0]
    return data


def always_fails(x: int) -> dict[str, int]:
    """Fail every time."""
    raise RuntimeError("this tool always fails")


def test_a_failed_steps_question_is_answered_by_policy(tmp_path: Path, monkeypatch) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from planexec.evaluation import EvalTarget

    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    step = {"tool": "always_fails", "args": {"x": 1}, "on_failure": "ask", "description": "fail"}
    again = {"always_fails": {"x": 2}}
    replanned = {"match": "remaining work", "tool_calls": [{"name": "Plan", "args": {
        "goal": "ask me", "steps": [again]}}]}  # fmt: skip
    planner = scripted(tmp_path, plan_reply("ask me", step), replanned)
    target = EvalTarget(tools=[always_fails], options={"planner_model": f"scripted:{planner}"},
                        workspace_root=tmp_path / "ws")  # fmt: skip
    outputs = target({"task": "ask me", "context": {"max_replans": 0}})
    assert outputs["status"] == "failed", outputs["error"]
    saver: InMemorySaver = target._saver
    state = saver.get_tuple({"configurable": {"thread_id": outputs["thread_id"]}})
    assert state is not None
    decisions = state.checkpoint["channel_values"]["decisions"]
    answered = [d for d in decisions if d["kind"] == "step_failure"]
    assert [d["action"] for d in answered] == ["replan"]  # what `run --yes` answers
    assert answered[0]["by"] == {"id": "policy:eval", "source": "policy"}


def test_a_workspace_that_is_not_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, output = evaluate("--replay", str(RECORDINGS), "--workspace", str(tmp_path / "file"))
    assert code == 2, output
    assert "--workspace" in output and "not a folder" in output


def test_temporary_workspaces_are_removed_and_given_ones_kept(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, output = evaluate("--replay", str(RECORDINGS))
    assert code == 0, output
    assert [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("planexec-eval")] == []
    code, output = evaluate("--replay", str(RECORDINGS), "--workspace", str(tmp_path / "ws"))
    assert code == 0, output
    assert len(list((tmp_path / "ws").iterdir())) == 3


NOISY = '''
import os, subprocess, sys
def noisy(x: int) -> dict:
    """Print to stdout four ways, then return."""
    print("noisy: print")
    sys.__stdout__.write("noisy: sys.__stdout__\\n"); sys.__stdout__.flush()
    os.write(1, b"noisy: fd 1\\n")
    subprocess.run(["echo", "noisy: child process"])
    return {"x": x}
TOOLS = [noisy]
'''


def test_what_tools_print_never_reaches_the_json_report(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "noisy.py").write_text(NOISY)
    planner = scripted(tmp_path, plan_reply("be noisy", {"noisy": {"x": 1}}))
    dataset = tmp_path / "ds.jsonl"
    dataset.write_text(json.dumps({"id": "n", "inputs": {"task": "be noisy"}}) + "\n")
    env = {**os.environ, "PLANEXEC_SCRIPTED_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "planexec", "eval", str(dataset), "--json",
         "--planner-model", f"scripted:{planner}", "--tools", f"{tmp_path / 'noisy.py'}:TOOLS",
         "--workspace", str(tmp_path / "ws")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["passed"] == 1
    for way in ("print", "sys.__stdout__", "fd 1", "child process"):
        assert f"noisy: {way}" in done.stderr


def test_every_example_has_a_row_even_without_a_result(tmp_path: Path, monkeypatch) -> None:
    import asyncio

    from planexec.evaluation import EvalTarget, evaluate_examples, load_dataset, runner

    examples = load_dataset(DATASET)
    real = runner.aevaluate

    async def drops_one(*args: Any, **kwargs: Any) -> Any:
        kwargs["data"] = kwargs["data"][1:]
        return await real(*args, **kwargs)

    monkeypatch.setattr(runner, "aevaluate", drops_one)
    target = EvalTarget(options={"planner_model": f"scripted:{PLANNER}"}, workspace_root=tmp_path)
    results = asyncio.run(evaluate_examples(examples, target, max_concurrency=1))
    assert [r.example.id for r in results] == IDS
    assert results[0].outputs["status"] == "error" and not results[0].passed
    assert "no result" in str(results[0].outputs["error"])
    with pytest.raises(ValueError, match="max_concurrency: at least 1"):
        asyncio.run(evaluate_examples(examples, target, max_concurrency=0))


def test_a_judge_that_cannot_run_fails_the_example(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(DATASET.read_text().splitlines()[0] + "\n")
    code, output = evaluate("--replay", str(RECORDINGS), "--judge", "--evaluator-model",
                            "openai:gpt-4.1-mini", dataset=dataset)  # fmt: skip
    assert code == 1, output
    assert "judge: evaluator error:" in output


def test_langsmith_errors_on_upload_are_one_line_and_exit_2(tmp_path: Path, monkeypatch) -> None:
    from langsmith.utils import LangSmithAuthError

    from planexec.evaluation import runner

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise LangSmithAuthError("Authentication failed for /sessions. HTTPError('401')\nmore")

    monkeypatch.setattr(runner, "aevaluate", refused)
    monkeypatch.setattr(runner, "Client", lambda: None)
    monkeypatch.setenv("LANGSMITH_API_KEY", "fake")
    monkeypatch.setattr(
        "planexec.cli.evaluate._examples",
        lambda request: __import__("planexec.evaluation", fromlist=["load_dataset"]).load_dataset(
            DATASET
        ),
    )
    args = ["eval", "team-set", "--upload", "--planner-model", f"scripted:{PLANNER}"]
    done = CliRunner().invoke(app, [*args, "--workspace", str(tmp_path)])
    assert done.exit_code == 2, done.output
    assert "LangSmith" in done.output and "401" in done.output
    assert "Traceback" not in done.output and "more" not in done.output


def test_a_replay_missing_an_examples_recording_is_refused_before_anything_runs(tmp_path):
    code, output = evaluate("--replay", str(tmp_path), planner=PLANNER)
    assert code == 2, output
    assert "no recording of example(s) trend-report, revenue-by-product, monthly-chart" in output


def test_plan_memory_with_a_recording_runs_the_examples_one_at_a_time(tmp_path):
    code, output = evaluate("--memory", "--record", str(tmp_path / "rec"), planner=PLANNER)
    assert code == 2 and "--max-concurrency 1" in output, output


DATASET_ID = "11111111-1111-4111-8111-111111111111"
EXPERIMENT_ID = "44444444-4444-4444-8444-444444444444"
STAMP = "2026-01-01T00:00:00"


def test_upload_records_an_experiment_of_a_langsmith_dataset(tmp_path, monkeypatch) -> None:
    from tests.langsmith_sink import Received, serve_langsmith

    row = json.loads(DATASET.read_text().splitlines()[1])  # revenue-by-product
    example = {"id": "33333333-3333-4333-8333-333333333333", "dataset_id": DATASET_ID,
               "inputs": {**row["inputs"], "data": ["sales.csv"]}, "outputs": row["outputs"],
               "created_at": STAMP, "modified_at": STAMP, "metadata": {}}  # fmt: skip
    dataset = {"id": DATASET_ID, "name": "team-set", "created_at": STAMP, "modified_at": STAMP,
               "tenant_id": "22222222-2222-4222-8222-222222222222", "data_type": "kv"}  # fmt: skip

    def experiment(body: dict[str, Any]) -> dict[str, Any]:
        return {"id": EXPERIMENT_ID, "name": body.get("name", "x"), "start_time": STAMP,
                "tenant_id": dataset["tenant_id"],
                "reference_dataset_id": body.get("reference_dataset_id")}  # fmt: skip

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copy(DEMO / "sales.csv", data_dir)
    got = Received()
    answers = {("GET", "/datasets"): [dataset], ("GET", "/examples"): [example],
               ("POST", "/sessions"): experiment, ("PATCH", "/sessions"): experiment}  # fmt: skip
    with serve_langsmith(got, answers=answers) as url:
        monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-fake-key-123")
        monkeypatch.setenv("LANGSMITH_ENDPOINT", url)
        monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
        args = ["--upload", "--data-dir", str(data_dir), "--workspace", str(tmp_path / "ws")]
        code, output = evaluate(*args, "--json", dataset="team-set")
    assert code == 0, output
    report = json.JSONDecoder().raw_decode(output[output.index("{\n") :])[0]
    assert report["totals"]["pass_rate"] == 1.0, report["examples"]
    assert any(p.startswith("/sessions") for p in got.paths), got.paths  # the experiment
    evaluated = [r for r in got.runs.values() if r.get("reference_example_id")]
    assert evaluated and evaluated[0]["session_name"].startswith("planexec"), got.paths
    scored = {f.get("key") for f in got.feedback}  # each evaluator's score, on its run
    assert {"trajectory", "answer_facts", "final_status"} <= scored, scored
