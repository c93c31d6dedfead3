"""Agent Chat UI in a real browser against ``langgraph dev`` serving planexec: by hand only.

Heavy (a Next.js server, Chromium, ``langgraph dev``; about a minute per UI), so it never runs
in default CI: it skips unless all of these are there, and CI sets none of them up:

* Node and npm, and built UIs in ``$PLANEXEC_CHAT_UI_DIR`` (``bench/agent_chat_ui.sh DIR``
  builds them from the npm registry): ``legacy`` is the ``create-agent-chat-app`` 0.1.6
  scaffold (the legacy Agent Inbox request: accept / edit / respond / ignore), ``current`` the
  agent-chat-ui repository (LangChain v1's request: approve / edit / reject); every folder of
  that directory with a ``next build`` in it is tested;
* Debian's Chromium (``/usr/bin/chromium``, or ``$PLANEXEC_CHROMIUM``);
* Playwright for Python (``pip install playwright``; no ``playwright install``: it drives the
  system's Chromium).

For each UI: a task typed in the chat box reaches the plan approval with its controls; approve
runs it to an answer in the chat; a second task on the thread is edited in the UI's textarea
(JSON text) and runs the edit; a third is rejected with feedback and comes back revised.
Screenshots go to a temp folder (``$PLANEXEC_CHAT_UI_SHOTS`` keeps them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, langgraph_dev

pytestmark = pytest.mark.server

UI_DIR = os.environ.get("PLANEXEC_CHAT_UI_DIR")
CHROMIUM = os.environ.get("PLANEXEC_CHROMIUM", "/usr/bin/chromium")
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the network is closed: no background fetches
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 90_000


def built_uis() -> list[Path]:
    """The built UIs under ``$PLANEXEC_CHAT_UI_DIR`` (folders with a ``next build``)."""
    if not UI_DIR:
        return []
    return sorted(p.parent.parent for p in Path(UI_DIR).glob("*/.next/BUILD_ID"))


def missing() -> str | None:
    """Why this test cannot run here, or None."""
    if not UI_DIR:
        return "set PLANEXEC_CHAT_UI_DIR to a folder built by bench/agent_chat_ui.sh"
    if not built_uis():
        return f"no built UI in {UI_DIR} (run bench/agent_chat_ui.sh {UI_DIR})"
    if not (shutil.which("node") and shutil.which("npm")):
        return "Node and npm are not installed"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install playwright)"
    return None


if missing():
    pytest.skip(str(missing()), allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402


def note_plan(goal: str, content: str) -> dict[str, Any]:
    """A plan that writes notes.md (a side effect) and then lists the folder."""
    return {
        "goal": goal,
        "steps": [
            {
                "id": 1,
                "tool": "write_file",
                "args": {"path": "notes.md", "content": content},
                "description": "write notes.md",
            },
            {
                "id": 2,
                "tool": "list_files",
                "args": {"folder": "."},
                "description": "list the files",
                "depends_on": [1],
            },
        ],
    }


PLANNER = [  # first match wins: the reviewer's feedback, else any task about a note
    ("shorter", note_plan("A shorter note (revised after feedback)", "short")),
    ("note", note_plan("Write a note and list the folder", "# Notes\nfrom planexec")),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """``langgraph dev`` with a scripted planner (the UI sends no context): URL, workspaces."""
    folder = tmp_path_factory.mktemp("chat-ui-server")
    script = folder / "planner.json"
    replies = [{"match": m, "tool_calls": [{"name": "Plan", "args": p}]} for m, p in PLANNER]
    script.write_text(json.dumps(replies))
    root = folder / "workspaces"
    env = {
        "PLANEXEC_SCRIPTED_DIR": str(folder),
        "PLANEXEC_PLANNER_MODEL": f"scripted:{script}",
        "PLANEXEC_WORKSPACE_ROOT": str(root),
    }
    with langgraph_dev(folder / "langgraph-dev.log", env) as url:
        yield url, root


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until ``url`` answers 200 (the UI's server is up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the UI's server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


@pytest.fixture(params=built_uis(), ids=lambda p: p.name)
def ui(request, tmp_path) -> Iterator[tuple[str, str]]:
    """One built UI served by ``next start`` on a free loopback port: its URL and name."""
    app: Path = request.param
    port = free_port()
    env = {**os.environ, "NEXT_TELEMETRY_DISABLED": "1"}
    with (tmp_path / "next.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(app / "node_modules/.bin/next"), "start", "-H", "127.0.0.1", "-p", str(port)],
            cwd=app,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(url, proc, timeout=90)
            yield url, app.name
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def page() -> Iterator[Page]:
    """A page of a fresh headless Chromium (its own profile folder)."""
    profile = tempfile.mkdtemp(prefix="planexec-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=BROWSER_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context.new_page()
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where screenshots go: ``$PLANEXEC_CHAT_UI_SHOTS``, else the test's temp folder."""
    folder = Path(os.environ.get("PLANEXEC_CHAT_UI_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


APPROVE = re.compile("^(Accept|Approve)$")
ASKED = "This plan awaits your decision"


def send(page: Page, text: str, asked: int) -> None:
    """Type a task in the chat box; wait for its approval (the ``asked``-th) and controls."""
    page.get_by_placeholder("Type your message...").fill(text)
    page.keyboard.press("Enter")
    expect(page.get_by_text(ASKED)).to_have_count(asked, timeout=WAIT_MS)
    expect(page.get_by_role("button", name=APPROVE)).to_be_visible(timeout=WAIT_MS)


def test_a_task_typed_in_agent_chat_ui_is_approved_edited_and_rejected(server, ui, page, shots):
    api, root = server
    url, name = ui
    page.goto(f"{url}/?apiUrl={api}&assistantId=planexec")
    send(page, "Write a note and list the files", asked=1)
    legacy = page.get_by_role("button", name="Accept", exact=True).count() == 1
    expect(page.get_by_text(re.compile("^Edit/(Accept|Approve)$"))).to_be_visible()
    reject_button = "Send Response" if legacy else "Submit rejection"
    expect(page.get_by_role("button", name=reject_button)).to_be_visible()
    if legacy:
        expect(page.get_by_role("button", name="Ignore", exact=True)).to_be_visible()
    expect(page.get_by_role("cell", name="write_file")).to_be_visible()  # the plan's table
    page.get_by_text(ASKED).scroll_into_view_if_needed()
    page.screenshot(path=shots / f"{name}-1-approval.png")

    page.get_by_role("button", name=APPROVE).click()  # approve: runs, answers in the chat
    expect(page.get_by_text("Files: notes.md")).to_be_visible(timeout=WAIT_MS)
    page.screenshot(path=shots / f"{name}-2-answer.png")
    thread_id = re.search(r"threadId=([0-9a-f-]+)", page.url)
    assert thread_id, page.url
    folder = root / "threads" / thread_id.group(1)
    assert (folder / "notes.md").read_text() == "# Notes\nfrom planexec"

    send(page, "Another note please", asked=2)  # a second task on the thread: edit its plan
    areas = page.locator("textarea")
    steps = next(
        areas.nth(i) for i in range(areas.count()) if areas.nth(i).input_value().startswith("[")
    )
    edited = json.loads(steps.input_value())
    edited[0]["args"] = {"path": "edited.md", "content": "edited in the UI"}
    steps.fill(json.dumps(edited))
    page.get_by_role("button", name="Submit", exact=True).click()
    expect(page.get_by_text("Files: edited.md")).to_be_visible(timeout=WAIT_MS)
    assert (folder / "edited.md").read_text() == "edited in the UI"
    page.screenshot(path=shots / f"{name}-3-edited.png")

    send(page, "One more note", asked=3)  # a third: rejected with feedback, comes back revised
    feedback = "Your response here..." if legacy else "Share feedback with the agent..."
    page.get_by_placeholder(feedback).fill("make it shorter")
    page.get_by_role("button", name=reject_button).click()
    expect(page.get_by_text(ASKED)).to_have_count(4, timeout=WAIT_MS)
    revised = page.get_by_text("A shorter note (revised after feedback)")
    expect(revised.first).to_be_visible(timeout=WAIT_MS)
    page.screenshot(path=shots / f"{name}-4-rejected.png")
    if legacy:  # the legacy request can also be ignored: planexec cancels the run
        page.get_by_role("button", name="Ignore", exact=True).click()
        expect(page.get_by_text("Cancelled by the reviewer: ignored")).to_be_visible(
            timeout=WAIT_MS
        )
    assert (folder / "notes.md").read_text() == "# Notes\nfrom planexec"  # nothing else ran
