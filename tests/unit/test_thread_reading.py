"""What a thread's latest checkpoint says is left to run (:func:`planexec.runs.reading.thread_of`).

A run stopped after a task ended but before its superstep's checkpoint was saved (Ctrl-C while
a saver's background save was under way) leaves the ended task's writes in the checkpoint:
LangGraph's ``next`` then leaves the task out, and the thread looked finished, so ``planexec
resume`` said "already finished" of a thread that still waits for its approval.
"""

from __future__ import annotations

from langgraph.types import PregelTask, StateSnapshot

from planexec.runs.reading import thread_of


def snapshot(next_: tuple[str, ...], tasks: tuple[PregelTask, ...]) -> StateSnapshot:
    return StateSnapshot(
        values={"task": "t"},
        next=next_,
        config={"configurable": {"thread_id": "t1"}},
        metadata={},
        created_at=None,
        parent_config=None,
        tasks=tasks,
        interrupts=(),
    )


def test_a_task_whose_writes_wait_in_the_checkpoint_is_left_to_run():
    ended = PregelTask("id-1", "approval", ("__pregel_pull", "approval"), result={"x": 1})
    thread = thread_of("t1", snapshot((), (ended,)))
    assert thread is not None and not thread.finished
    assert thread.next == ("approval",) and thread.status == "waiting: approval"


def test_a_thread_with_nothing_pending_is_finished():
    thread = thread_of("t1", snapshot((), ()))
    assert thread is not None and thread.finished


def test_next_is_what_langgraph_says_when_it_says_something():
    waiting = PregelTask("id-2", "approval", ("__pregel_pull", "approval"))
    thread = thread_of("t1", snapshot(("approval",), (waiting,)))
    assert thread is not None and thread.next == ("approval",)
