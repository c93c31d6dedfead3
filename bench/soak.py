"""Soak: many runs with injected faults; count wedged threads, re-run committed steps, leaks.

    python bench/soak.py [--runs 1000] [--seed 7]

Each run seeds a random 3-6 step plan (as a state edit, as the CLI's --plan does), is approved
through the interrupt (with the digest shown) and runs, with one fault injected by kind:

* ``tool_raise``   a step raises (ValueError, OSError, or a transient error until it gives up)
* ``tool_hang``    a step blocks far past its timeout
* ``poison_value`` a step returns a value no checkpoint stores as it is (numpy, deep, NUL, ...)
* ``user_poison``  the reviewer sends an answer no checkpoint can store, or names another plan
* ``sigkill``      the run's process is SIGKILLed at a random moment, then resumed here
* ``saver_outage`` PostgreSQL is stopped mid-run (immediate), started again, and resumed

Every run also carries a step that returns and raises a secret and an executor-model step that
repeats it. After each run the thread must take a new task and finish it (else: wedged). A step
whose result was committed before a kill or outage must not run again (ledger of side effects).
At the end every stream chunk, the checkpoint databases and every file are searched for the
secrets. The last line reads
``soak: N runs, F faults, W wedged, D duplicated committed steps, S secrets found``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-soak-SECRET-" + "7f3a9c1e5b"
TOKEN = "tok-soak-TOKEN-" + "42d8e6b0a9"
os.environ["SOAK_API_KEY"] = SECRET
os.environ["SOAK_SERVICE_TOKEN"] = TOKEN
WORK = Path(os.environ.get("SOAK_DIR") or tempfile.mkdtemp(prefix="planexec-soak-"))
if not os.environ.get("SOAK_DIR"):  # a folder the user named is kept for them to look at
    atexit.register(shutil.rmtree, WORK, ignore_errors=True)
os.environ["PLANEXEC_WORKSPACE_ROOT"] = str(WORK / "root")
os.environ["PLANEXEC_SCRIPTED_DIR"] = str(WORK)
LEDGER = WORK / "ledger.txt"
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.types import Command  # noqa: E402

from planexec import Context, build_graph  # noqa: E402
from planexec.admission import InvalidInputError  # noqa: E402
from planexec.errors import TransientToolError  # noqa: E402
from planexec.plan import to_doc, validate_plan  # noqa: E402
from planexec.storage.persistence import postgres_saver, sqlite_saver  # noqa: E402
from planexec.tools import ToolRegistry  # noqa: E402

KINDS = [
    "none",
    "tool_raise",
    "tool_hang",
    "poison_value",
    "user_poison",
    "sigkill",
    "saver_outage",
]
WEIGHTS = [30, 15, 10, 15, 15, 8, 7]
MODES = ["values", "updates", "custom", "messages", "debug", "tasks", "checkpoints"]


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


POISON = {
    "numpy": lambda: {"mean": np.float64(2.5), "n": np.int64(7), "flag": np.bool_(True)},
    "pandas": lambda: {"when": pd.Timestamp("2025-03-01"), "total": pd.Series([1.5, 2.0]).sum()},
    "deep": lambda: _nested(300),
    "nul": lambda: "a\x00b",
    "bigint": lambda: {"n": 2**80},
    "surrogate": lambda: "bad \ud800 text",
    "nan": lambda: [float("nan"), float("inf")],
    "object": lambda: object(),
    "set_bytes": lambda: {
        "s": {3, 1, 2},
        "b": b"\xff\xfe",
        "d": __import__("decimal").Decimal("1.10"),
    },
}


def _ledger(label: str) -> None:
    with LEDGER.open("a") as handle:
        handle.write(label + "\n")


@tool
def work(label: str, seconds: float = 0.0) -> dict[str, Any]:
    """Do some work, then record that this step's side effect happened."""
    if seconds:
        time.sleep(seconds)
    _ledger(label)
    return {"label": label, "done": True}


@tool
def fault(label: str, kind: str) -> Any:
    """Misbehave in the given way."""
    if kind == "raise_value":
        raise ValueError(f"boom with {SECRET}")
    if kind == "raise_os":
        raise OSError("disk on fire")
    if kind == "raise_transient":
        raise TransientToolError("service busy")
    if kind == "hang":
        time.sleep(1.0)  # past the 0.3 s step timeout: abandoned, counted, then it ends
        return "late"
    return POISON[kind]()


@tool
def leak(label: str) -> dict[str, Any]:
    """Return and mention secrets from the environment."""
    if label.endswith("raise"):
        raise RuntimeError(f"auth failed for {os.environ['SOAK_API_KEY']}")
    return {"key": os.environ["SOAK_API_KEY"], "note": f"token {os.environ['SOAK_SERVICE_TOKEN']}"}


TOOLS = ToolRegistry([work, fault, leak])


def executor_script() -> str:
    path = WORK / "executor.json"
    if not path.exists():
        path.write_text(json.dumps([{"match": ".", "content": f"done; the key is {SECRET}"}]))
    return f"scripted:{path}"


def context(**overrides: Any) -> Context:
    base: dict[str, Any] = dict(
        planner_model="scripted:none",
        executor_model=executor_script(),
        step_timeout=0.3,
        step_max_attempts=2,
        retry_initial_interval=0.01,
        max_replans=0,
        max_parallel_steps=4,
    )
    base.update(overrides)
    return Context(**base)


def make_plan(rng: random.Random, tid: str, kind: str, slow: bool) -> dict[str, Any]:
    n = rng.randint(3, 6)
    steps = []
    for i in range(1, n + 1):
        deps = sorted(rng.sample(range(1, i), k=min(i - 1, rng.randint(0, 2))))
        args: dict[str, Any] = {"label": f"{tid}:{i}"}
        if slow:
            args["seconds"] = round(rng.uniform(0.05, 0.25), 3)
        if deps and rng.random() < 0.5:
            args["label"] = f"{tid}:{i} after $" + str(deps[0]) + ".label"
        steps.append(
            {"id": i, "tool": "work", "args": args, "description": f"step {i}", "depends_on": deps}
        )
    faulty = rng.randint(1, n)
    if kind == "tool_raise":
        flavour = rng.choice(["raise_value", "raise_os", "raise_transient"])
        steps[faulty - 1] |= {"tool": "fault", "args": {"label": "x", "kind": flavour}}
    elif kind == "tool_hang":
        steps[faulty - 1] |= {"tool": "fault", "args": {"label": "x", "kind": "hang"}}
    elif kind == "poison_value":
        steps[faulty - 1] |= {
            "tool": "fault",
            "args": {"label": "x", "kind": rng.choice(list(POISON))},
        }
    steps.append(
        {
            "id": n + 1,
            "tool": "leak",
            "args": {"label": rng.choice(["ok", "raise"])},
            "description": "leak",
            "depends_on": [],
        }
    )
    steps.append(
        {
            "id": n + 2,
            "tool": None,
            "args": {},
            "description": "summarise",
            "depends_on": [],
            "expected_output": "a sentence",
        }
    )
    return {"goal": f"soak {tid}", "steps": steps}


def seed(graph: Any, config: dict[str, Any], plan: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Put the plan into the thread (as --plan does) and return the approval request."""
    doc = to_doc(validate_plan(plan, TOOLS, max_steps=30), version=1)
    graph.update_state(config, {"task": plan["goal"], "plan": doc}, as_node="planner")
    out = graph.invoke(None, config, context=ctx)
    return dict(out["__interrupt__"][0].value)


def approve(request: dict[str, Any]) -> Command:
    return Command(resume={"action": "approve", "digest": request["digest"]})


HOSTILE_ANSWERS = [
    {"action": "approve", "n": 2**70},
    {"action": "reject", "feedback": "no\x00pe"},
    {"action": "approve", "deep": _nested(100)},
    {"action": "approve", "digest": "0" * 64},
    {"action": "approve", "version": 99},
    {"action": "launch"},
    "\ud800",
]


class Findings:
    """What the soak counts."""

    def __init__(self) -> None:
        self.runs = 0
        self.faults: Counter[str] = Counter()
        self.wedged: list[str] = []
        self.duplicated: list[str] = []
        self.errors: Counter[str] = Counter()
        self.chunks: list[str] = []


def stream_run(graph: Any, payload: Any, config: dict[str, Any], ctx: Context, f: Findings) -> None:
    for chunk in graph.stream(payload, config, context=ctx, stream_mode=MODES):
        f.chunks.append(json.dumps(chunk, default=repr, ensure_ascii=False))


def finish(graph: Any, config: dict[str, Any], ctx: Context, f: Findings) -> None:
    """Drive the thread to its end: approve any plan it asks about, resume anything pending."""
    for _ in range(6):
        state = graph.get_state(config)
        if not state.next:
            return
        if state.interrupts:
            stream_run(graph, approve(state.interrupts[0].value), config, ctx, f)
        else:
            stream_run(graph, None, config, ctx, f)
    raise RuntimeError(f"thread did not end: next={graph.get_state(config).next}")


def takes_a_new_task(
    graph: Any, config: dict[str, Any], ctx: Context, tid: str, f: Findings
) -> None:
    plan = {
        "goal": "again",
        "steps": [
            {
                "id": 1,
                "tool": "work",
                "args": {"label": f"{tid}:again"},
                "description": "again",
                "depends_on": [],
            }
        ],
    }
    request = seed(graph, config, plan, ctx)
    out = graph.invoke(approve(request), config, context=ctx)
    final = out.get("final") or {}
    if final.get("status") not in ("succeeded", "failed", "partial"):
        raise RuntimeError(f"the new task did not end: {final}")
    if final["status"] != "succeeded":  # it ran and ended with a reason: not a wedge; count why
        reason = (final.get("failed_steps") or [{}])[0].get("error") or final.get("answer", "")
        f.errors[f"new task ended {final['status']}: {str(reason)[:70]}"] += 1


def committed_steps(saver: Any, config: dict[str, Any]) -> set[int]:
    """Ids of steps whose result LangGraph has committed (task writes or executor output)."""
    done: set[int] = set()
    for item in saver.list(config):
        for _, channel, value in item.pending_writes or []:
            if channel == "__return__" and isinstance(value, dict) and "id" in value:
                done.add(int(value["id"]))
        for sid, rec in ((item.checkpoint.get("channel_values") or {}).get("steps") or {}).items():
            if isinstance(rec, dict) and rec.get("status") not in (None, "pending"):
                done.add(int(sid))
    return done


def ledger_counts() -> Counter[str]:
    if not LEDGER.exists():
        return Counter()
    return Counter(line.split(" after ")[0] for line in LEDGER.read_text().splitlines())


def in_process_run(graph: Any, rng: random.Random, kind: str, f: Findings) -> None:
    tid = str(uuid.uuid4())
    config = {"configurable": {"thread_id": tid}}
    ctx = context()
    plan = make_plan(rng, tid, kind, slow=False)
    try:
        seed(graph, config, plan, ctx)
        if kind == "user_poison":
            answer = rng.choice(HOSTILE_ANSWERS)
            try:
                stream_run(graph, Command(resume=answer), config, ctx, f)
            except InvalidInputError:
                f.errors["refused at admission"] += 1
        finish(graph, config, ctx, f)
        takes_a_new_task(graph, config, ctx, tid, f)
    except Exception as exc:  # a soak records, it does not stop
        f.wedged.append(f"{kind} {tid}: {type(exc).__name__}: {exc}"[:300])
    for label, count in ledger_counts().items():
        if label.startswith(tid) and count > 1:
            f.duplicated.append(f"{kind} {label} ran {count} times")


WORKER = """
import json, sys
sys.path.insert(0, {root!r})
import bench.soak as soak
from langgraph.types import Command
from planexec.storage.persistence import {opener}
with {opener}(sys.argv[1]) as saver:
    graph = soak.build_graph(checkpointer=saver, tools=soak.TOOLS)
    config = {{"configurable": {{"thread_id": sys.argv[2]}}}}
    ctx = soak.context()
    graph.invoke(Command(resume=json.loads(sys.argv[3])), config, context=ctx)
"""


def resume_and_check(
    kind: str, opened: Any, config: dict[str, Any], ctx: Context, f: Findings
) -> None:
    """After a fault: resume the thread to its end, give it a new task, count re-run steps."""
    tid = config["configurable"]["thread_id"]
    try:
        with opened as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS)
            committed = committed_steps(saver, config)
            finish(graph, config, ctx, f)
            takes_a_new_task(graph, config, ctx, tid, f)
    except Exception as exc:
        f.wedged.append(f"{kind} {tid}: {type(exc).__name__}: {exc}"[:300])
        return
    counts = ledger_counts()
    for sid in committed:
        if counts.get(f"{tid}:{sid}", 0) > 1:
            f.duplicated.append(f"{kind} {tid}:{sid} committed, then ran again")


def killed_run(db: str, rng: random.Random, f: Findings) -> None:
    """Approve in a child process, SIGKILL it at a random moment, resume here."""
    tid = str(uuid.uuid4())
    config = {"configurable": {"thread_id": tid}}
    ctx = context()
    with sqlite_saver(db) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        request = seed(graph, config, make_plan(rng, tid, "none", slow=True), ctx)
    answer = json.dumps({"action": "approve", "digest": request["digest"]})
    script = WORKER.format(root=str(ROOT), opener="sqlite_saver")
    env = {**os.environ, "SOAK_DIR": str(WORK), "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.Popen(
        [sys.executable, "-c", script, db, tid, answer],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    time.sleep(rng.uniform(1.6, 2.6))  # the child needs ~1.5 s to import before it runs
    child.send_signal(signal.SIGKILL)
    child.wait()
    if child.returncode != -signal.SIGKILL:  # it ended before the kill: say how
        last = (child.stderr.read().decode(errors="replace").strip().splitlines() or ["ok"])[-1]
        f.errors[f"sigkill: child ended first ({last[:80]})"] += 1
    resume_and_check("sigkill", sqlite_saver(db), config, ctx, f)


def outage_run(pg: Any, rng: random.Random, f: Findings) -> None:
    """Stop PostgreSQL mid-run, start it again, resume."""
    tid = str(uuid.uuid4())
    config = {"configurable": {"thread_id": tid}}
    ctx = context()
    with postgres_saver(pg.url) as saver:
        graph = build_graph(checkpointer=saver, tools=TOOLS)
        request = seed(graph, config, make_plan(rng, tid, "none", slow=True), ctx)
        timer = threading.Timer(rng.uniform(0.02, 0.3), pg.stop)
        timer.start()
        try:
            graph.invoke(approve(request), config, context=ctx)
        except Exception as exc:  # the outage is expected to fail the run
            f.errors[f"outage: {type(exc).__name__}"] += 1
        timer.join()
    pg.start()
    resume_and_check("saver_outage", postgres_saver(pg.url), config, ctx, f)


def secrets_found(f: Findings, extra: list[bytes]) -> list[str]:
    found = []
    for i, chunk in enumerate(f.chunks):
        if SECRET in chunk or TOKEN in chunk:
            found.append(f"stream chunk {i}: {chunk[:120]}")
    for path in WORK.rglob("*"):
        if path.is_file() and path != LEDGER and path.name != "executor.json":
            data = path.read_bytes()
            if SECRET.encode() in data or TOKEN.encode() in data:
                found.append(f"file {path}")
    for i, blob in enumerate(extra):
        if SECRET.encode() in blob or TOKEN.encode() in blob:
            found.append(f"database dump {i}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    f = Findings()
    db = str(WORK / "runs.sqlite")
    from tests.servers import PostgresServer

    pg = PostgresServer()
    pg.start()
    started = time.perf_counter()
    try:
        with sqlite_saver(db) as saver:
            graph = build_graph(checkpointer=saver, tools=TOOLS)
            for _ in range(args.runs):
                kind = rng.choices(KINDS, WEIGHTS)[0]
                f.runs += 1
                if kind != "none":
                    f.faults[kind] += 1
                if kind == "sigkill":
                    killed_run(db, rng, f)
                elif kind == "saver_outage":
                    outage_run(pg, rng, f)
                else:
                    in_process_run(graph, rng, kind, f)
        dumps = [Path(db).read_bytes()]
        with (
            contextlib.suppress(Exception),
            postgres_saver(pg.url) as saver,
            saver.conn.cursor() as cur,  # type: ignore[union-attr]
        ):
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                cur.execute(f"SELECT * FROM {table}")  # fixed names
                dumps.append(repr(cur.fetchall()).encode())
    finally:
        pg.remove()
    leaks = secrets_found(f, dumps)
    took = time.perf_counter() - started
    print(f"runs tried: {f.runs} in {took:.0f} s")
    print("faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(f.faults.items())))
    print("refusals and errors seen: " + ", ".join(f"{k} {v}" for k, v in sorted(f.errors.items())))
    for line in (f.wedged + f.duplicated + leaks)[:20]:
        print("  !", line)
    print(
        f"soak: {f.runs} runs, {sum(f.faults.values())} faults, {len(f.wedged)} wedged, "
        f"{len(f.duplicated)} duplicated committed steps, {len(leaks)} secrets found"
    )


if __name__ == "__main__":
    main()
