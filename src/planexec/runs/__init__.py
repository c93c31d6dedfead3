"""The runs API: start, resume, read and list planexec runs from Python (sync or async).

Runs live in a LangGraph checkpointer: open one from a database string (a SQLite path or a
``postgresql://`` URL) with :meth:`Runs.open` / :meth:`Runs.aopen`, or wrap any saver in
``Runs(saver)``. Example::

    from planexec import Runs, new_run

    with Runs.open("runs.sqlite") as runs:
        result = runs.start(new_run("Summarise sales.csv", workspace="ws", data=["sales.csv"]))
        print(result.request["plan"])  # the plan waiting for approval
        result = runs.resume(result.thread_id, {"action": "approve"})
        print(result.status)
"""

from planexec.runs.db import RunError, aopen_saver, default_db, is_postgres, open_saver, redact
from planexec.runs.driver import Runs
from planexec.runs.request import RunRequest, new_run, run_settings, sandbox_for
from planexec.runs.types import (
    Caller,
    Decide,
    OnEvent,
    ReviewRequest,
    RunResult,
    StepEvent,
    ThreadState,
    ThreadSummary,
)

__all__ = [
    "ReviewRequest",
    "Caller",
    "Decide",
    "OnEvent",
    "RunError",
    "RunRequest",
    "RunResult",
    "Runs",
    "StepEvent",
    "ThreadState",
    "ThreadSummary",
    "aopen_saver",
    "default_db",
    "is_postgres",
    "new_run",
    "open_saver",
    "redact",
    "run_settings",
    "sandbox_for",
]
