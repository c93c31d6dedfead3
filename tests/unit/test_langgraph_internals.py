"""Every LangGraph name planexec relies on still means what planexec/compat/langgraph.py says.

Each test runs a function of :mod:`planexec.compat.langgraph` through a real tiny graph with
an InMemorySaver and fails with "LangGraph changed <name>: see planexec/compat/langgraph.py"
when the name is gone or its meaning changed. The last test keeps every other module of
planexec off LangGraph's private names.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig, RunnableLambda, ensure_config
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.func import task
from langgraph.graph import StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

try:
    from planexec.compat import langgraph as compat
except ImportError as exc:  # a private name is gone: say which, not just "ImportError"
    pytest.fail(
        f"LangGraph changed {exc.name or exc}: see planexec/compat/langgraph.py ({exc})",
        pytrace=False,
    )

SRC = Path(__file__).resolve().parents[2] / "src" / "planexec"
PRIVATE = re.compile(
    r"langgraph\._internal|__pregel_|CONFIG_KEY_|from langgraph\.constants import CONF\b"
)
ALLOWED = {
    "compat/langgraph.py",  # the one module that may
}


@contextlib.contextmanager
def langgraph_meaning(name: str) -> Iterator[None]:
    """Turn any failure in the block into one message naming the LangGraph name that changed."""
    try:
        yield
    except Exception as exc:  # AssertionError included: the name is there, its meaning is not
        pytest.fail(
            f"LangGraph changed {name}: see planexec/compat/langgraph.py "
            f"({type(exc).__name__}: {exc})",
            pytrace=False,
        )


class S(TypedDict, total=False):
    n: int


def one_node_graph(node: Any, saver: BaseCheckpointSaver[Any] | None = None) -> Any:
    builder = StateGraph(S)
    builder.add_node("node", node)
    builder.set_entry_point("node")
    builder.set_finish_point("node")
    return builder.compile(checkpointer=saver if saver is not None else InMemorySaver())


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def test_checkpointer_of_is_the_saver_the_graph_runs_with():
    saver = InMemorySaver()
    seen: list[Any] = []

    def node(state: S, config: RunnableConfig) -> S:
        seen.append(compat.checkpointer_of(config))
        return {"n": 1}

    one_node_graph(node, saver).invoke({"n": 0}, thread("t"))
    with langgraph_meaning("CONFIG_KEY_CHECKPOINTER"):
        [found] = seen
        assert isinstance(found, InMemorySaver), found
        assert found.storage is saver.storage  # LangGraph may hand the node a copy
    assert compat.checkpointer_of(thread("t")) is None


def test_is_resuming_only_on_a_resume():
    seen: list[bool] = []

    def node(state: S, config: RunnableConfig) -> S:
        seen.append(compat.is_resuming(config))
        interrupt("go on?")
        return {"n": 1}

    graph = one_node_graph(node)
    graph.invoke({"n": 0}, thread("t"))
    graph.invoke(Command(resume="yes"), thread("t"))
    with langgraph_meaning("CONFIG_KEY_RESUMING"):
        assert seen == [False, True]


@task
def a_step(i: int) -> dict[str, Any]:
    return {"ran": f"step-{i}"}


def test_task_results_finds_a_tasks_return_value_after_a_resume():
    found: list[Any] = []

    def node(state: S, config: RunnableConfig) -> S:
        where = compat.node_checkpoint(config)
        if where is None:
            found.append(None)
        else:
            saver, checkpoint = where
            pending = saver.get_tuple(checkpoint)
            found.append(compat.task_results(pending.pending_writes if pending else None))
        results = [future.result() for future in [a_step(1), a_step(2)]]
        interrupt("approve?")
        return {"n": len(results)}

    graph = one_node_graph(node)
    graph.invoke({"n": 0}, thread("t"))
    graph.invoke(Command(resume="yes"), thread("t"))
    with langgraph_meaning("RETURN (the '__return__' channel of a task's result)"):
        assert found[0] is None, "a fresh run has no earlier attempt"
        assert sorted(r["ran"] for r in found[1]) == ["step-1", "step-2"], found


async def test_node_checkpoint_and_task_results_in_an_async_run():
    found: list[Any] = []

    async def node(state: S, config: RunnableConfig) -> S:
        where = compat.node_checkpoint(config)
        if where is not None:
            pending = await where[0].aget_tuple(where[1])
            found.append(compat.task_results(pending.pending_writes if pending else None))
        await a_step(3)
        interrupt("approve?")
        return {"n": 1}

    graph = one_node_graph(node)
    await graph.ainvoke({"n": 0}, thread("t"))
    await graph.ainvoke(Command(resume="yes"), thread("t"))
    with langgraph_meaning("Runtime.execution_info / RETURN"):
        assert found == [[{"ran": "step-3"}]]


def test_parent_task_id_is_the_task_a_nested_run_is_called_from():
    inside: list[str | None] = []

    def node(state: S, config: RunnableConfig) -> S:
        # what a graph invoked here merges (LangGraph passes the node's config on)
        inside.append(compat.parent_task_id(ensure_config()))
        return {"n": 1}

    events = list(one_node_graph(node).stream({"n": 0}, thread("t"), stream_mode="tasks"))
    task_ids = {event["id"] for event in events if event.get("name") == "node"}
    with langgraph_meaning("Runtime.execution_info.task_id (was __pregel_task_id)"):
        assert inside[0] is not None and inside == [next(iter(task_ids))], (inside, task_ids)
    assert compat.parent_task_id(thread("t")) is None
    assert compat.parent_task_id(None) is None


def test_parent_task_id_inside_a_subgraphs_task():
    inside: list[tuple[str | None, str]] = []

    def child_node(state: S, config: RunnableConfig) -> S:
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        inside.append((compat.parent_task_id(config), ns))
        return {"n": 2}

    child = one_node_graph(child_node)

    def parent_node(state: S, config: RunnableConfig) -> S:
        return child.invoke(state)

    one_node_graph(parent_node).invoke({"n": 0}, thread("t"))
    with langgraph_meaning("Runtime.execution_info.task_id (was __pregel_task_id)"):
        [(task_id, ns)] = inside
        assert task_id is not None and ns.endswith(task_id), (task_id, ns)
        assert ns.count("|") == 1, ns  # the child's node, in the parent's node


def test_with_stream_writer_reaches_a_nested_call():
    mine: list[Any] = []

    def node(state: S, config: RunnableConfig) -> S:
        nested: RunnableConfig = {
            "configurable": compat.with_stream_writer(config["configurable"], mine.append)
        }
        RunnableLambda(lambda _: get_stream_writer()("chunk")).invoke(None, nested)
        return {"n": 1}

    custom = [
        chunk
        for mode, chunk in one_node_graph(node).stream(
            {"n": 0}, thread("t"), stream_mode=["custom", "values"]
        )
        if mode == "custom"
    ]
    with langgraph_meaning("CONFIG_KEY_RUNTIME"):
        assert mine == ["chunk"] and custom == []
    assert compat.with_stream_writer({"thread_id": "t"}, mine.append) == {"thread_id": "t"}


class FailingWrites(InMemorySaver):
    """A saver whose task results cannot be saved (put_writes fails in the background)."""

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        raise OSError("the disk is gone")


def test_failed_background_saves_sees_a_failed_save_before_the_run_ends():
    seen: list[Any] = []

    def node(state: S, config: RunnableConfig) -> S:
        check = compat.failed_background_saves(config)
        seen.append(check)
        if check is None:
            return {"n": 1}
        a_step(1).result()  # its result is saved (put_writes) in the background
        deadline = time.monotonic() + 5
        while (error := check()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(error)
        return {"n": 1}

    with contextlib.suppress(OSError):  # re-raised by LangGraph when the run ends
        one_node_graph(node, FailingWrites()).invoke({"n": 0}, thread("t"))
    with langgraph_meaning("CONFIG_KEY_CALL → schedule_task.__self__ → submit.__self__.tasks"):
        assert seen[0] is not None, "the background saves were not found"
        assert isinstance(seen[1], OSError), seen


def test_runtime_of_is_none_outside_a_graph_task():
    assert compat.runtime_of(None) is None
    assert compat.runtime_of(thread("t")) is None


def test_no_other_module_touches_langgraphs_private_names():
    offenders = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in ALLOWED
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not offenders, "use planexec.compat.langgraph instead:\n" + "\n".join(offenders)


def test_the_approval_request_uses_no_deprecated_langgraph_type():
    """``langgraph.prebuilt.interrupt``'s Agent Inbox types are deprecated: planexec has its own."""
    import warnings

    from langgraph.warnings import LangGraphDeprecatedSinceV10

    from planexec.review import hitl

    plan: Any = {"goal": "g", "steps": [], "version": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error", LangGraphDeprecatedSinceV10)
        fields = hitl.requests(plan, "run it?", can_approve=True)
    assert fields["action_request"] == {"action": hitl.ACTION, "args": {"goal": "g", "steps": []}}
    assert fields["config"] == {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": True,
    }
    imports = re.compile(r"^\s*(from|import) langgraph\.prebuilt\.interrupt\b", re.MULTILINE)
    users = [p for p in sorted(SRC.rglob("*.py")) if imports.search(p.read_text())]
    assert not users, users
