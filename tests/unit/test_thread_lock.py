"""The thread lock's parts: hostile thread ids, lock files, the error a busy thread raises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from planexec import build_graph
from planexec.errors import PlanexecError
from planexec.storage import thread_lock
from planexec.storage.persistence import sqlite_saver
from planexec.storage.thread_lock import (
    LOCK_DIR_SUFFIX,
    FileLock,
    ThreadBusyError,
    advisory_key,
    hold,
)

HOSTILE_IDS = [
    "../../../../tmp/evil",
    "/etc/passwd",
    "a/b\\c",
    "nul\x00byte",
    "lone \udc80 surrogate",
    "é" * 5000,
    "",
    " ",
    "*",
    "CON",
]


def config(thread_id: object) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def test_busy_is_a_planexec_and_value_error_naming_the_thread():
    assert issubclass(ThreadBusyError, PlanexecError) and issubclass(ThreadBusyError, ValueError)


@pytest.mark.parametrize("thread_id", HOSTILE_IDS)
def test_hostile_thread_ids_lock_one_file_inside_the_lock_folder(tmp_path, thread_id):
    db = tmp_path / "runs.sqlite"
    with sqlite_saver(db) as saver:
        graph = build_graph(checkpointer=saver)
        with hold(graph, config(thread_id)):
            locks = Path(str(db) + LOCK_DIR_SUFFIX)
            [held] = list(locks.iterdir())
            assert held.parent == locks and len(held.name) == len("0" * 32 + ".lock")
            with pytest.raises(ThreadBusyError), hold(graph, config(thread_id)):
                pass
        assert not list(locks.iterdir())
    assert all(entry.startswith("runs.sqlite") for entry in os.listdir(tmp_path))


def test_distinct_ids_do_not_block_each_other_and_keys_are_stable():
    graph = build_graph(checkpointer=InMemorySaver())
    with (
        hold(graph, config("a")),
        hold(graph, config("b")),
        hold(graph, config(1)),
        pytest.raises(ThreadBusyError),
        hold(graph, config("1")),  # LangGraph stores thread ids as text
    ):
        pass
    assert advisory_key("a") == advisory_key("a") != advisory_key("b")
    assert -(2**63) <= advisory_key("lone \udc80") < 2**63


def test_no_saver_or_no_thread_takes_no_lock():
    for graph, cfg in [
        (build_graph(), config("t")),
        (build_graph(checkpointer=InMemorySaver()), {"configurable": {}}),
    ]:
        with hold(graph, cfg), hold(graph, cfg):  # nothing to hold: both enter
            pass


def test_a_lock_file_removed_by_its_holder_is_not_shared(tmp_path, monkeypatch):
    """A run that opened the file its holder then removed starts over with the new file."""
    first, second = FileLock(str(tmp_path / "db"), "t"), FileLock(str(tmp_path / "db"), "t")
    first.acquire()
    stale = os.open(first.path, os.O_RDWR)  # the racing run opened the file before...
    first.release()  # ...its holder removed it and let go
    real_open, opened = os.open, []

    def racing_open(*args, **kwargs):
        opened.append(args[0])
        return stale if len(opened) == 1 else real_open(*args, **kwargs)

    monkeypatch.setattr(thread_lock.os, "open", racing_open)
    second.acquire()  # locks the stale file, sees it is gone, locks the new one
    monkeypatch.undo()
    assert len(opened) == 2 and os.fstat(second.fd).st_ino == os.stat(second.path).st_ino
    with pytest.raises(ThreadBusyError):
        FileLock(str(tmp_path / "db"), "t").acquire()
    second.release()


def test_a_checkpoint_namespace_alone_does_not_escape_the_lock():
    """LangGraph runs a root graph given a namespace on the thread's own state: still held."""
    graph = build_graph(checkpointer=InMemorySaver())
    namespaced = {"configurable": {"thread_id": "t", "checkpoint_ns": "x"}}
    with hold(graph, config("t")), pytest.raises(ThreadBusyError), hold(graph, namespaced):
        pass


async def test_a_run_cancelled_while_it_takes_the_lock_leaves_the_thread_free(
    tmp_path, monkeypatch
):
    """The lock is taken in a worker thread; if the run is cancelled meanwhile, it lets go."""
    import asyncio
    import time

    from planexec.storage.persistence import async_sqlite_saver
    from planexec.storage.thread_lock import ahold

    real_acquire, taken = FileLock.acquire, asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_acquire(self):
        time.sleep(0.2)
        real_acquire(self)
        loop.call_soon_threadsafe(taken.set)

    async with async_sqlite_saver(tmp_path / "runs.sqlite") as saver:
        graph = build_graph(checkpointer=saver)

        async def run():
            async with ahold(graph, config("t")):
                raise AssertionError("the cancelled run went on")

        monkeypatch.setattr(FileLock, "acquire", slow_acquire)
        task = asyncio.create_task(run())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await taken.wait()  # the worker thread did take the lock after the cancellation...
        monkeypatch.undo()
        for _ in range(100):  # ...and lets go of it right after
            try:
                async with ahold(graph, config("t")):
                    break
            except ThreadBusyError:
                await asyncio.sleep(0.01)
        else:
            raise AssertionError("the thread stayed busy")
