"""Read threads back from checkpoints: a thread's state and settings, a row of the list."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from planexec.runs.types import ThreadState, ThreadSummary

LISTED = 2000  # newest checkpoints scanned when listing threads


def thread_config(thread_id: str) -> RunnableConfig:
    """Return the config that names a thread."""
    return {"configurable": {"thread_id": thread_id}}


def text(value: object) -> str | None:
    """Return a metadata value that is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


SETTINGS_KEY = "planexec_context"
"""Metadata key of a run's saved settings (with ``planexec_workspace``, ``planexec_outputs``)."""


def has_settings(metadata: Mapping[str, Any] | None) -> bool:
    """Say whether a checkpoint's metadata keeps a run's settings (a state edit's does not)."""
    return bool(metadata) and SETTINGS_KEY in (metadata or {})


def saved_settings(
    checkpointer: BaseCheckpointSaver[Any], config: RunnableConfig
) -> Mapping[str, Any] | None:
    """Return the metadata of a thread's newest checkpoint that keeps its run's settings."""
    found = (i.metadata for i in checkpointer.list(config) if has_settings(i.metadata))
    return next(found, None)


async def asaved_settings(
    checkpointer: BaseCheckpointSaver[Any], config: RunnableConfig
) -> Mapping[str, Any] | None:
    """Async :func:`saved_settings`."""
    items = checkpointer.alist(config)
    try:
        async for item in items:
            if has_settings(item.metadata):
                return item.metadata
        return None
    finally:
        if isinstance(items, AsyncGenerator):  # close the saver's cursor now, not at GC
            await items.aclose()


def thread_of(
    thread_id: str, snapshot: StateSnapshot, settings: Mapping[str, Any] | None = None
) -> ThreadState | None:
    """Read a snapshot's values and the run's settings (None if empty).

    The settings come from ``settings`` (the newest checkpoint metadata that keeps them, when
    the latest checkpoint, e.g. a state edit's, does not), else from the snapshot's metadata.
    """
    if not snapshot.values:
        return None
    meta = settings if settings is not None else (snapshot.metadata or {})
    saved = json.loads(str(meta.get(SETTINGS_KEY) or "{}"))
    folder = text(meta.get("planexec_workspace"))
    if folder is None and os.path.isabs(str(saved.get("workspace") or "")):
        # runs started before planexec_workspace existed kept their folder in the context;
        # any other value is the name of a shared workspace, which the run keeps using
        folder = text(saved.pop("workspace"))
    outputs = text(meta.get("planexec_outputs"))
    # a run stopped after a task ended but before its superstep's checkpoint was saved (Ctrl-C
    # as a sync saver's background save runs): LangGraph's ``next`` leaves out the ended task,
    # whose writes wait in the checkpoint; a resume applies them and goes on
    pending = tuple(snapshot.next) or tuple(task.name for task in snapshot.tasks)
    return ThreadState(
        thread_id,
        snapshot.values,
        pending,
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
