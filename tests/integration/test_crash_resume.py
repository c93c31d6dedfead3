from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import ROOT, plan_of, step

PLAN = plan_of(
    step(1, "append_line", {"label": "one", "seconds": 0.05}),
    step(2, "append_line", {"label": "two", "seconds": 0.05}, [1]),
    step(3, "append_line", {"label": "three", "seconds": 2.5}),
    step(4, "append_line", {"label": "four", "seconds": 2.5}, [2]),
    step(5, "append_line", {"label": "five after $3.label and $4.label", "seconds": 0.05}, [3, 4]),
)


def worker(action: str, db: str, ws: Path, thread_id: str, script: Path, mode: str):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.crash_worker",
            action,
            db,
            str(ws),
            thread_id,
            str(script),
            mode,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(ws: Path) -> list[str]:
    log = ws / "log.txt"
    return log.read_text().splitlines() if log.exists() else []


def run_to_end(action, db, ws, thread_id, script, mode) -> dict:
    proc = worker(action, db, ws, thread_id, script, mode)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads((ws / "result.json").read_text())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_killed_run_resumes_without_rerunning_finished_steps(tmp_path, mode):
    script = tmp_path / "planner.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": PLAN}]}]))

    reference_ws = tmp_path / "reference"
    reference = run_to_end(
        "start", str(tmp_path / "ref.db"), reference_ws, str(uuid.uuid4()), script, mode
    )

    ws, db, thread_id = tmp_path / "ws", str(tmp_path / "runs.db"), str(uuid.uuid4())
    proc = worker("start", db, ws, thread_id, script, mode)
    deadline = time.time() + 60
    while lines(ws) != ["one", "two"]:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "steps 1 and 2 never finished"
        time.sleep(0.02)
    time.sleep(0.3)  # steps 3 and 4 are running now
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lines(ws) == ["one", "two"]

    resumed = run_to_end("resume", db, ws, thread_id, script, mode)
    assert sorted(lines(ws)) == sorted(["one", "two", "three", "four", "five after three and four"])
    assert resumed == reference
    assert resumed["final"]["status"] == "succeeded"
