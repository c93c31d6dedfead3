"""Shared test helpers: scripted replies, plans, and runs driven like a user would."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec.llm.scripted import ScriptedChatModel, ScriptedReply

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DEMO = Path(str(resources.files("planexec") / "demo"))
"""The demo data and recorded plan ``planexec demo`` runs: their one copy, in the package."""


def plan_reply(plan: dict[str, Any], match: str | None = None) -> ScriptedReply:
    """A reply calling the Plan tool with ``plan``."""
    return ScriptedReply(tool_calls=[{"name": "Plan", "args": plan}], match=match)


def text_reply(text: str, match: str | None = None) -> ScriptedReply:
    """A plain text reply."""
    return ScriptedReply(content=text, match=match)


def scripted(*replies: ScriptedReply) -> ScriptedChatModel:
    """A fresh scripted model."""
    return ScriptedChatModel(replies=list(replies))


def step(
    sid: int,
    tool_name: str | None,
    args: dict[str, Any] | None = None,
    deps: list[int] | None = None,
    expected: str = "",
) -> dict[str, Any]:
    """A plan step as a dict."""
    return {
        "id": sid,
        "tool": tool_name,
        "args": args or {},
        "description": f"step {sid}",
        "depends_on": deps or [],
        "expected_output": expected,
    }


def plan_of(*steps: dict[str, Any], goal: str = "test goal") -> dict[str, Any]:
    """A plan as a dict."""
    return {"goal": goal, "steps": list(steps)}


def sales_plan() -> dict[str, Any]:
    """The recorded sales-analysis plan of ``planexec demo``, written out in the full format.

    The file is in the compact format a planner writes; this is the plan as state keeps it
    (what a reviewer edits).
    """
    from planexec.plan import to_doc, validate_plan
    from planexec.tools import default_registry

    compact = json.loads((DEMO / "sales_plan.json").read_text())
    doc = to_doc(validate_plan(compact, default_registry(), max_steps=50), version=1)
    return {"goal": doc["goal"], "steps": doc["steps"]}


def thread() -> dict[str, Any]:
    """A config with a fresh thread id."""
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def run_plan(graph: Any, context: Any, mode: str, config: Any = None) -> dict[str, Any]:
    """Plan, approve and run to the end (or the next interrupt), sync or async; return the
    last state."""
    config = config or thread()
    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=context)
        return graph.invoke(Command(resume={"action": "approve"}), config, context=context)

    async def go() -> dict[str, Any]:
        await graph.ainvoke({"task": "t"}, config, context=context)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)

    return asyncio.run(go())


def wait_until(check: Callable[[], Any], seconds: float) -> bool:
    """Poll ``check`` for up to ``seconds``; say whether it came true."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return bool(check())


def scenario_report(module: str, *args: str, seconds: float) -> dict[str, Any]:
    """Run ``python -m module *args`` (a scenario that may wedge or end its process) and
    return the JSON it printed on its last ``REPORT `` line, or what went wrong instead."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "wedged: the run did not end"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    if not lines:
        return {"outcome": f"no report; exit {done.returncode}", "stderr": done.stderr[-2000:]}
    report: dict[str, Any] = json.loads(lines[-1].removeprefix("REPORT "))
    return report


def scenario_outcome(plan: dict[str, Any], tools: Any, mode: str) -> dict[str, Any]:
    """Plan and run ``plan`` with ``tools`` in a fresh workspace (``mode``: sync or async) and
    return what a subprocess scenario reports: what escaped the run, or each step's status and
    error. Meant for the process :func:`scenario_report` starts (it sets the environment)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from planexec import build_graph
    from planexec.context import Context
    from planexec.llm import models
    from planexec.tools.sandbox import Sandbox

    root = tempfile.mkdtemp()
    os.environ["PLANEXEC_WORKSPACE_ROOT"] = root
    Sandbox.at(Path(root)).workspace_path("ws", None).mkdir(parents=True)
    model = scripted(plan_reply(plan))
    models.provider_model = lambda spec, *_: model
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    context = Context(
        planner_model="test:planner",
        executor_model="test:executor",
        evaluator_model="test:evaluator",
        shared_folder="ws",
        max_replans=0,
        step_max_attempts=1,
    )
    try:
        out = run_plan(graph, context, mode)
    except BaseException as exc:  # what escaped the run is the finding
        return {"outcome": f"the run raised {type(exc).__name__}"}
    steps = {k: [v["status"], v.get("error")] for k, v in out["steps"].items()}
    return {"outcome": "ended", "steps": steps}


def loop_threads() -> list[threading.Thread]:
    """The live threads of planexec's event loops: one per process (``planexec``), no more."""
    names = ("planexec", "planexec-steps", "planexec-models", "planexec-mcp")
    return [t for t in threading.enumerate() if t.name in names and t.is_alive()]


calls: dict[str, int] = {}
"""How many times each key was counted by tools that count their calls (keys are per test)."""


def count(key: str) -> int:
    """Count a call under ``key``; return the count."""
    calls[key] = calls.get(key, 0) + 1
    return calls[key]


@tool
async def swallows(key: str, seconds: float) -> str:
    """Work for `seconds` on the loop, ignoring cancellation."""
    count(key)
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(max(0.0, deadline - time.time()))
    return "finished late"


@tool
def sleep_for(seconds: float, label: str = "") -> dict[str, Any]:
    """Sleep for some seconds; return when it started and ended."""
    start = time.time()
    time.sleep(seconds)
    return {"label": label, "start": start, "end": time.time()}


@tool
async def async_sleep_for(seconds: float, label: str = "") -> dict[str, Any]:
    """Sleep (asynchronously) for some seconds; return when it started and ended."""
    import asyncio

    start = time.time()
    await asyncio.sleep(seconds)
    return {"label": label, "start": start, "end": time.time()}


@tool
def always_fails(reason: str = "broken") -> str:
    """A tool that always raises."""
    raise ValueError(f"it failed: {reason}")


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


for _harmless in (swallows, sleep_for, async_sleep_for, always_fails, echo):
    # declared harmless (a tool that declares nothing counts as side-effecting)
    _harmless.metadata = {**(_harmless.metadata or {}), "side_effects": False}


def scratch_folder(prefix: str) -> str:
    """A temp folder for a module's lifetime (made at import), removed when the process ends."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


@contextlib.contextmanager
def savers(kind: str, tmp_path: Any, request: Any) -> Iterator[tuple[Any, Any]]:
    """(sync saver factory, async saver factory) of one store, as context managers."""
    from planexec.storage import persistence

    if kind == "memory":
        saver = InMemorySaver()

        @contextlib.asynccontextmanager
        async def same() -> AsyncIterator[Any]:
            yield saver

        yield (lambda: contextlib.nullcontext(saver)), same
    elif kind == "sqlite":
        db = tmp_path / "db" / "runs.sqlite"
        yield (lambda: persistence.sqlite_saver(db)), (lambda: persistence.async_sqlite_saver(db))
    else:
        url = request.getfixturevalue("postgres_url")
        yield (
            (lambda: persistence.postgres_saver(url)),
            (lambda: persistence.async_postgres_saver(url)),
        )
