"""Usage counting: one callback handler per role counts calls and tokens, bounded."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from planexec.llm.scripted import ScriptedChatModel
from planexec.llm.scrubbed import ScrubbedChatModel
from planexec.llm.usage import UsageCounter, usage_of
from tests.helpers import text_reply


class Names(BaseTracer):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_run_update(self, run: Run) -> None:
        self.names.append(run.name)


def scrubbed_model() -> ScrubbedChatModel:
    return ScrubbedChatModel.around(ScriptedChatModel(replies=[text_reply("ok", ".")]))


def test_nothing_counted_is_an_empty_update():
    assert UsageCounter("planner").usage() == {}


def test_each_call_counts_once_with_its_tokens_and_other_callbacks_still_see_it():
    model = scrubbed_model()  # the wrapper's quiet inner call must not count a second time
    counter, tracer = UsageCounter("planner"), Names()

    def node(_: object) -> None:
        model.invoke("a prompt of some length", counter.config())
        model.invoke("another", counter.config())

    RunnableLambda(node, name="node").invoke(None, {"callbacks": [tracer]})
    usage = counter.usage()["planner"]
    assert usage["calls"] == 2 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert tracer.names.count("ScrubbedChatModel") == 2 and "node" in tracer.names


def test_async_calls_are_counted():
    model, counter = scrubbed_model(), UsageCounter("executor")

    async def run() -> None:
        await asyncio.gather(*(model.ainvoke("hi", counter.config({"tags": ["t"]})) for _ in "abc"))

    asyncio.run(run())
    assert counter.usage()["executor"]["calls"] == 3


def test_a_reply_without_sane_token_counts_counts_the_call_only():
    message = AIMessage(content="")
    message.usage_metadata = {"input_tokens": 10**30, "output_tokens": "many", "total_tokens": -5}  # type: ignore[typeddict-item]
    assert usage_of("planner", message) == {
        "planner": {"calls": 1, "input_tokens": 0, "output_tokens": 0}
    }
    counter = UsageCounter("evaluator")
    result = ChatResult(generations=[ChatGeneration(message=message)])
    counter.on_llm_end(LLMResult(generations=[result.generations]), run_id=None)  # type: ignore[arg-type]
    counter.on_llm_end(LLMResult(generations=[]), run_id=None)  # type: ignore[arg-type]
    assert counter.usage() == {"evaluator": {"calls": 2, "input_tokens": 0, "output_tokens": 0}}
