"""``examples/your_tools.py`` runs as its guide says: offline, against an OpenAI-compatible server,
and the guide's shell lines (the example, the CLI with ``--tools``) run as written.

The program runs in a process of its own, as a user starts it; the server is the local
OpenAI-compatible test server answering from the example's own reply file
(:class:`tests.openai_server.Canned`), so the real client path (``init_chat_model`` →
langchain-openai → HTTP) is what runs. No network, no key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import EXAMPLES, ROOT
from tests.integration.test_docs_snippets import LOCAL_ENDPOINT, blocks_of
from tests.openai_server import Canned, serve

PROGRAM = EXAMPLES / "your_tools.py"
REPLIES = EXAMPLES / "your_tools_replies.json"
GUIDE = ROOT / "docs/guides/your-tools-your-model.md"
NOTE = "10 ACME: 1255.0 USD (two years: 25.5 %)"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a user with no model configured, and files kept under ``tmp_path``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "PLANEXEC_", "LANGSMITH_", "LANGCHAIN_"))
    }
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_DATA_HOME=str(tmp_path / "home" / "data"),
        PLANEXEC_DB=str(tmp_path / "runs.sqlite"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a command as a user would, with a time limit; its output as text."""
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def check_ran(done: subprocess.CompletedProcess[str], folder: Path) -> None:
    """The program succeeded, printed its outputs, and its note is in the workspace only."""
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tools that write or send: save_note" in done.stdout
    assert "status: succeeded" in done.stdout
    assert "output 3 (in a file): [100.0, 100.03" in done.stdout  # spilled, read back
    assert f"portfolio.txt: {NOTE}" in done.stdout
    assert (folder / "my-data" / "portfolio.txt").read_text() == NOTE
    assert not (folder / "portfolio.txt").exists()


def shown_output() -> list[str]:
    """The lines of the example's output the guide shows (``...`` and cut lines aside)."""
    blocks = blocks_of(GUIDE)
    shown = next(
        b
        for before, b in zip(blocks, blocks[1:], strict=False)
        if b.language == "text" and "python examples/your_tools.py" in before.code
    )
    return [
        line
        for line in shown.code.splitlines()
        if line.strip() and not line.strip().startswith("...") and "…" not in line
    ]


def test_the_example_runs_offline_with_the_scripted_model(tmp_path: Path) -> None:
    done = run([sys.executable, str(PROGRAM), "my-data"], tmp_path, clean_env(tmp_path))
    check_ran(done, tmp_path)
    printed = done.stdout.splitlines()
    assert [line for line in shown_output() if line not in printed] == []  # the guide shows it


def test_the_example_runs_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    canned = Canned(REPLIES)
    with serve(canned) as (url, requests):
        env = clean_env(
            tmp_path, OPENAI_BASE_URL=url, OPENAI_API_KEY="local-key", EXAMPLE_MODEL="local-llm"
        )
        done = run([sys.executable, str(PROGRAM), "my-data"], tmp_path, env)
    check_ran(done, tmp_path)
    assert canned.unanswered == []
    assert [r["model"] for r in requests] == ["local-llm", "local-llm"]  # planner, step 6
    assert {r["auth"] for r in requests} == {"Bearer local-key"}
    assert "Task: What is my portfolio worth?" in str(requests[0]["messages"])


def shell_blocks() -> list[str]:
    """The guide's ```bash blocks (every one is meant to run from the repository's root)."""
    return [b.code for b in blocks_of(GUIDE) if b.language in {"bash", "sh", "shell"}]


def test_the_guide_shows_the_example_and_the_cli() -> None:
    text = "\n".join(shell_blocks())
    assert "python examples/your_tools.py" in text
    assert "planexec run " in text and "--tools examples/your_tools.py:" in text


@pytest.mark.parametrize("number", range(len(shell_blocks())), ids=lambda n: f"block{n + 1}")
def test_the_guides_shell_blocks_run_as_written(tmp_path: Path, number: int) -> None:
    """Each block runs with bash from a copy of the repository's examples, offline."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    canned = Canned(REPLIES)
    with serve(canned) as (url, _requests):
        script = shell_blocks()[number].replace(LOCAL_ENDPOINT, url)
        done = run(["bash", "-euo", "pipefail", "-c", script], tmp_path, clean_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert canned.unanswered == []
    assert (tmp_path / "my-data" / "portfolio.txt").read_text() == NOTE
    if "planexec show" in script:  # the spilled price history, read back by the CLI
        assert "100.03" in done.stdout
