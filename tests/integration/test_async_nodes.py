"""The planner, replanner and judge call their models with ``ainvoke``, on every run.

On a LangGraph server every run is async: a sync model node would hold a thread of the event
loop's default pool (min(32, cpus + 4) threads) for the whole model call, so concurrent runs
would queue behind that pool. Each node is written once, as a coroutine: a sync run
(``invoke``) runs it on planexec's background loop, so it calls its models the same way.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import PrivateAttr

from planexec import build_graph
from planexec.llm.scripted import ScriptedChatModel, ScriptedReply
from planexec.tools import ToolRegistry
from tests.helpers import always_fails, echo, plan_of, plan_reply, step


class Rendezvous:
    """Counts calls in flight; each waits (up to a timeout) until ``size`` are in flight."""

    def __init__(self, size: int, timeout: float = 5.0) -> None:
        self.size, self.timeout = size, timeout
        self.in_flight = self.most = 0
        self.cond = threading.Condition()

    def enter(self) -> None:
        with self.cond:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.cond.notify_all()

    def full(self) -> bool:
        with self.cond:
            return self.most >= self.size

    def leave(self) -> None:
        with self.cond:
            self.in_flight -= 1

    def wait_sync(self) -> None:
        self.enter()
        with self.cond:
            self.cond.wait_for(lambda: self.most >= self.size, timeout=self.timeout)
        self.leave()

    async def wait_async(self) -> None:
        self.enter()
        deadline = asyncio.get_running_loop().time() + self.timeout
        while not self.full() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        self.leave()


class TwoFacedModel(ScriptedChatModel):
    """A scripted model that records which API each call came through (sync or async)."""

    calls: list[str] = []
    _meeting: Rendezvous | None = PrivateAttr(default=None)
    _lock2: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def meet(self, meeting: Rendezvous) -> TwoFacedModel:
        """Make every call wait at ``meeting`` before it answers."""
        self._meeting = meeting
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock2:
            self.calls.append("sync")
        if self._meeting is not None:
            self._meeting.wait_sync()
        return super()._generate(messages, stop, None, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock2:
            self.calls.append("async")
        if self._meeting is not None:
            await self._meeting.wait_async()
        return super()._generate(messages, stop, None, **kwargs)


FAILING = plan_of(step(1, "always_fails", {"reason": "disk full"}), step(2, "echo", {"text": "b"}))
REVISION = plan_of(step(3, "echo", {"text": "again, after ${2}"}, [2]))
VERDICTS = ScriptedReply(tool_calls=[{"name": "Verdicts", "args": {"verdicts": []}}], match=".")


def models() -> dict[str, TwoFacedModel]:
    """A planner that writes a failing plan then its revision, and a judge."""
    planner = TwoFacedModel(replies=[plan_reply(FAILING), plan_reply(REVISION)], calls=[])
    judge = TwoFacedModel(replies=[VERDICTS], calls=[])
    return {"planner": planner, "evaluator": judge}


def graph_with(chat: dict[str, TwoFacedModel]) -> Any:
    return build_graph(
        InMemorySaver(),
        tools=ToolRegistry([echo, always_fails]),
        models=chat,
        approval="first",
    )


CONTEXT = {"llm_judge": True, "max_replans": 1}


def test_sync_runs_call_the_models_as_async_runs_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chat = models()
    graph = graph_with(chat)
    config = {"configurable": {"thread_id": "sync"}}
    graph.invoke({"task": "t"}, config, context=CONTEXT)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=CONTEXT)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert chat["planner"].calls == ["async", "async"]  # plan, then the revision
    assert chat["evaluator"].calls and set(chat["evaluator"].calls) == {"async"}


def test_async_runs_call_the_models_async_api(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    chat = models()
    graph = graph_with(chat)
    config = {"configurable": {"thread_id": "async"}}

    async def run() -> dict[str, Any]:
        await graph.ainvoke({"task": "t"}, config, context=CONTEXT)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=CONTEXT)

    out = asyncio.run(run())
    assert out["final"]["status"] == "succeeded", out["final"]
    assert chat["planner"].calls == ["async", "async"]  # plan, then the revision
    assert chat["evaluator"].calls and set(chat["evaluator"].calls) == {"async"}


@pytest.mark.parametrize("runs", [24])
def test_concurrent_async_planners_are_not_capped_by_a_thread_pool(tmp_path, monkeypatch, runs):
    """All planner calls of ``runs`` concurrent runs are in flight at once (a rendezvous).

    With a sync planner node each call would hold one of the loop's default-pool threads
    (6 on a 2-core machine, at most 32) and the rendezvous could never fill.
    """
    monkeypatch.chdir(tmp_path)

    meeting = Rendezvous(runs)

    async def run_all() -> list[dict[str, Any]]:
        planner = TwoFacedModel(
            replies=[plan_reply(plan_of(step(1, "echo", {"text": "x"})), match=".")], calls=[]
        ).meet(meeting)
        graph = graph_with({"planner": planner})
        return await asyncio.gather(
            *(
                graph.ainvoke({"task": f"t{i}"}, {"configurable": {"thread_id": f"c{i}"}})
                for i in range(runs)
            )
        )

    outs = asyncio.run(run_all())
    assert all("__interrupt__" in out for out in outs)
    assert meeting.most == runs  # every planner call was in flight at once
