"""No secret reaches the CLI's output: env secrets, database passwords, crash tracebacks.

The hostile run of ``tests.leaky`` through ``planexec run|show|threads|resume``; database URLs
with passwords that libpq quotes back in its errors.
"""

from __future__ import annotations

import pytest

from planexec.redaction.secrets import REDACTED
from tests import leaky


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """A CLI session in a fresh folder, with its own run database."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    return tmp_path


def cli(*args: str, input: str | None = None):
    from typer.testing import CliRunner

    from planexec.cli import app

    return CliRunner().invoke(app, list(args), input=input)


def test_cli_output_and_the_run_database_stay_clean(cli_env, monkeypatch):
    import json
    import re

    from planexec import graph as graph_module
    from planexec.runs import request as run_request

    for name, value in leaky.ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(graph_module, "default_registry", leaky.registry)
    monkeypatch.setattr(run_request, "default_registry", leaky.registry)
    models = {}
    for role, model in (("p", leaky.planner()), ("e", leaky.executor()), ("j", leaky.judge())):
        path = cli_env / f"{role}.json"
        path.write_text(json.dumps([r.model_dump() for r in model.replies]))
        models[role] = f"scripted:{path}"
    common = ["--workspace", "ws", "--max-replans", "0", "--judge", "--yes"]
    models_args = ["--planner-model", models["p"], "--executor-model", models["e"]]
    models_args += ["--evaluator-model", models["j"]]
    ran = cli("run", "leak everything", *common, *models_args)
    assert ran.exit_code == 1, ran.output  # partial: steps 2 and 3 fail
    assert "step 1" in ran.output and REDACTED in ran.output
    tid = re.search(r"thread ([0-9a-f-]{36})", ran.output).group(1)
    as_json = cli("run", "leak everything again", *common, *models_args, "--json")
    assert json.loads(as_json.stdout)["steps"]["1"]["output"]["key"] == REDACTED
    outputs = [ran, as_json]
    for args in (["show", tid], ["show", tid, "--json"], ["threads"], ["threads", "--json"]):
        outputs.append(cli(*args))
    outputs.append(cli("resume", tid, "--yes"))
    for result in outputs:
        assert "Traceback" not in result.output, result.output
        assert leaky.leaks([result.output, result.stderr]) == [], result.output
    assert leaky.leaking_files([cli_env / "ws"]) == []
    db_files = list(cli_env.glob("runs.sqlite*"))
    assert db_files and leaky.leaking_files(db_files) == []


PG_PASSWORD = "Pw-S3cret-9876"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{PG_PASSWORD}@127.0.0.1:1/none",
        f"postgresql://u:p%zz{PG_PASSWORD}@127.0.0.1:1/none",  # libpq quotes the bad token
        f"postgres://u:{PG_PASSWORD}@[::1:1/none",  # libpq quotes the whole URL
        f"postgresql://u:x@{PG_PASSWORD}@127.0.0.1:1/none",  # an @ in the password
        f"postgresql://u@127.0.0.1:1/none?password={PG_PASSWORD}",
    ],
)
def test_database_passwords_never_reach_cli_output(cli_env, url):
    for command in (["show", "x"], ["resume", "x"], ["threads"]):
        result = cli(*command, "--db", url)
        assert result.exit_code == 2, result.output
        assert "cannot open the run database" in result.output
        assert PG_PASSWORD not in result.output, result.output
        assert "Traceback" not in result.output


def test_database_passwords_stay_hidden_in_a_real_session(cli_env, postgres_url):
    import json
    import re

    from tests.helpers import plan_of, step

    url = postgres_url.replace("postgres@", f"postgres:{PG_PASSWORD}@", 1)
    assert PG_PASSWORD in url
    plan_file = cli_env / "plan.json"
    plan_file.write_text(json.dumps(plan_of(step(1, "write_file", {"path": "a", "content": "b"}))))
    ran = cli("run", "--plan", str(plan_file), "--workspace", "ws", "--db", url, input="")
    assert ran.exit_code == 1  # paused at the approval prompt
    tid = re.search(r"thread ([0-9a-f-]{36})", ran.output).group(1)
    outputs = [ran]
    for command in (
        ["show", tid],
        ["show", "00000000-0000-0000-0000-000000000000"],
        ["threads"],
        ["threads", "--json"],
        ["resume", "00000000-0000-0000-0000-000000000000"],
        ["resume", tid, "--yes"],
        ["show", tid, "--json"],
    ):
        outputs.append(cli(*command, "--db", url))
    assert "postgresql://postgres:***@127.0.0.1" in outputs[3].output
    assert outputs[6].exit_code == 0, outputs[6].output
    for result in outputs:
        assert PG_PASSWORD not in result.output, result.output


def test_a_crash_prints_a_scrubbed_traceback(cli_env, monkeypatch):
    from planexec.cli import actions

    monkeypatch.setenv("OPENAI_API_KEY", leaky.SECRET)

    async def crash(*args, **kwargs):
        raise RuntimeError(f"bug while holding {leaky.SECRET} for postgresql://u:{PG_PASSWORD}@h")

    monkeypatch.setattr(actions, "show", crash)
    result = cli("show", "x")
    assert result.exit_code == 1
    assert "Traceback" in result.output and f"RuntimeError: bug while holding {REDACTED}" in (
        result.output
    )
    assert leaky.leaks(result.output) == [] and PG_PASSWORD not in result.output
