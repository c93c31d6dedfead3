"""Read threads back from checkpoints: a thread's state and settings, a row of the list."""

from __future__ import annotations

import json
from collections.abc import Iterable

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from planexec.runs.types import ThreadState, ThreadSummary

LISTED = 2000  # newest checkpoints scanned when listing threads


def thread_config(thread_id: str) -> RunnableConfig:
    """Return the config that names a thread."""
    return {"configurable": {"thread_id": thread_id}}


def text(value: object) -> str | None:
    """Return a metadata value that is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def thread_of(thread_id: str, snapshot: StateSnapshot) -> ThreadState | None:
    """Read a snapshot's values and the run settings its metadata keeps (None if empty)."""
    if not snapshot.values:
        return None
    meta = snapshot.metadata or {}
    saved = json.loads(str(meta.get("planexec_context") or "{}"))
    # runs started before planexec_workspace existed kept their folder in the context
    folder = text(meta.get("planexec_workspace")) or text(saved.pop("workspace", None))
    outputs = text(meta.get("planexec_outputs"))
    return ThreadState(
        thread_id,
        snapshot.values,
        tuple(snapshot.next),
        snapshot.created_at,
        folder,
        outputs,
        saved,
    )


def newest_threads(configs: Iterable[RunnableConfig]) -> list[str]:
    """Return the thread ids of checkpoint configs listed newest first, each once."""
    seen: dict[str, None] = {}  # an insertion-ordered set
    for config in configs:
        seen.setdefault(config["configurable"]["thread_id"], None)
    return list(seen)


def summary_of(thread_id: str, snapshot: StateSnapshot) -> ThreadSummary:
    """Return a thread's row in the thread list: its task, status and last update."""
    thread = ThreadState(thread_id, snapshot.values or {}, tuple(snapshot.next))
    return {
        "thread_id": thread_id,
        "task": str(thread.values.get("task", "")),
        "status": thread.status,
        "updated": snapshot.created_at,
    }
