"""Budgets: tokens, cost and working time per run, enforced where every model call and step starts.

A budget that is spent stops new model calls and new steps (those running finish); the run
ends with a partial result that names the budget, and the thread stays inspectable.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.context import InvalidContextError
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

TOKENS_PER_CALL = 200  # 100 in, 100 out


class FixedUsage(BaseChatModel):
    """An executor model that answers after ``delay`` seconds, reporting 100 + 100 tokens."""

    delay: float = 0.3
    calls: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    lock: Any = None

    @property
    def _llm_type(self) -> str:
        return "fixed-usage"

    def _reply(self) -> ChatResult:
        message = AIMessage(
            content="Final: ok",
            usage_metadata={"input_tokens": 100, "output_tokens": 100, "total_tokens": 200},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _enter(self) -> None:
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self._enter()
        time.sleep(self.delay)
        self._leave()
        return self._reply()

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        self._enter()
        await asyncio.sleep(self.delay)
        self._leave()
        return self._reply()


SIX_MODEL_STEPS = plan_of(
    *(step(i, None, {"about": f"part {i}"}, expected="a line") for i in range(1, 7))
)


def planned(use_models, ctx, **limits: Any) -> tuple[Any, dict, FixedUsage, int]:
    """Plan the six model steps and stop at the approval; return the planner's tokens too."""
    executor = FixedUsage(lock=threading.Lock())
    use_models(planner=scripted(plan_reply(SIX_MODEL_STEPS)), executor=executor)
    graph = build_graph(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"task": "six parts"}, config, context=ctx(max_replans=0))
    usage = graph.get_state(config).values["usage"]["planner"]
    return graph, config, executor, usage["input_tokens"] + usage["output_tokens"]


def worked(graph: Any, config: dict) -> float:
    """Working seconds the run spent before the round (planning: longer on a loaded machine)."""
    return float(graph.get_state(config).values.get("busy_seconds") or 0.0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_token_budget_holds_mid_round_with_parallel_model_steps(use_models, ctx, mode):
    """Two slots, 200 tokens a call, 500 tokens left after planning: calls 1-2 run, calls 3-4
    start while 400 are spent, then no call starts (at most the calls in flight overshoot)."""
    graph, config, executor, planner_tokens = planned(use_models, ctx)
    limit = planner_tokens + 500
    run_ctx = ctx(max_replans=0, max_parallel_steps=2, max_tokens=limit)
    answer = Command(resume={"action": "approve"})
    if mode == "sync":
        out = graph.invoke(answer, config, context=run_ctx)
    else:
        out = asyncio.run(graph.ainvoke(answer, config, context=run_ctx))

    assert executor.calls == 4, executor.calls
    assert executor.most_in_flight == 2
    final = out["final"]
    assert final["status"] == "partial", final
    assert final["budget"] == {
        "budget": "tokens",
        "limit": limit,
        "spent": planner_tokens + 4 * TOKENS_PER_CALL,
    }
    assert "token budget" in final["answer"]
    records = out["steps"]
    statuses = sorted(r["status"] for r in records.values())
    assert statuses == ["skipped", "skipped", "succeeded", "succeeded", "succeeded", "succeeded"]
    for rec in records.values():
        if rec["status"] == "skipped":
            assert "token budget" in rec["error"], rec
    assert out["usage"]["executor"]["calls"] == 4
    assert graph.get_state(config).next == ()  # ended, inspectable


def test_without_a_budget_every_step_runs(use_models, ctx):
    graph, config, executor, _ = planned(use_models, ctx)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx(max_replans=0))
    assert executor.calls == 6 and out["final"]["status"] == "succeeded"
    assert "budget" not in out["final"]


def test_a_cost_budget_uses_the_price_table_the_user_sets(use_models, ctx):
    """$1 per million tokens in and out: each executor call costs $0.0002."""
    graph, config, executor, planner_tokens = planned(use_models, ctx)
    prices = {
        "test:planner": {"input": 1.0, "output": 1.0},
        "test:executor": {"input": 1.0, "output": 1.0},
    }
    limit = (planner_tokens + 500) / 1e6
    run_ctx = ctx(max_replans=0, max_parallel_steps=2, max_cost=limit, model_prices=prices)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=run_ctx)
    assert executor.calls == 4
    assert out["final"]["budget"]["budget"] == "cost"
    assert out["final"]["budget"]["spent"] == pytest.approx((planner_tokens + 800) / 1e6)
    assert "cost budget" in out["final"]["answer"]


def test_a_cost_budget_needs_a_price_for_every_model_it_counts(use_models, ctx):
    with pytest.raises(InvalidContextError, match=r"no price for test:planner.*model_prices"):
        ctx(max_cost=1.0)


def test_a_time_budget_stops_new_steps(use_models, ctx):
    """Working time, not time waiting for a human: the approval's wait does not count."""
    graph, config, executor, _ = planned(use_models, ctx)
    time.sleep(1.0)  # the reviewer thinks: not working time
    run_ctx = ctx(max_replans=0, max_parallel_steps=1, max_seconds=worked(graph, config) + 0.9)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=run_ctx)
    # one step at a time, 0.3 s each: steps start at about 0, 0.3 and 0.6 s, not at 0.9 s
    assert 2 <= executor.calls <= 4, executor.calls
    assert out["final"]["budget"]["budget"] == "seconds"
    assert "time budget" in out["final"]["answer"]


def test_a_time_budget_holds_mid_round_with_parallel_steps(use_models, ctx):
    """Two slots, 0.3 s a step, 0.45 s of working time left after planning: steps 1-2 start
    at 0 s, 3-4 at about 0.3 s (in flight together), and none of 5-6 starts at 0.6 s: the
    round stops mid-way."""
    graph, config, executor, _ = planned(use_models, ctx)
    run_ctx = ctx(max_replans=0, max_parallel_steps=2, max_seconds=worked(graph, config) + 0.45)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=run_ctx)
    assert executor.most_in_flight == 2
    assert 2 <= executor.calls <= 4, executor.calls  # never the whole round
    final = out["final"]
    assert final["status"] == "partial" and final["budget"]["budget"] == "seconds", final
    skipped = [r for r in out["steps"].values() if r["status"] == "skipped"]
    assert len(skipped) == 6 - executor.calls
    assert all("time budget" in r["error"] for r in skipped)


def test_a_spent_budget_stops_the_planner_before_its_call(use_models, ctx):
    use_models(planner=scripted(plan_reply(SIX_MODEL_STEPS)))
    graph = build_graph(checkpointer=InMemorySaver())
    out = graph.invoke({"task": "six parts"}, thread(), context=ctx(max_tokens=0))
    assert out["final"]["status"] == "failed"
    assert out["final"]["budget"]["budget"] == "tokens"
    assert out.get("usage", {}).get("planner", {}).get("calls", 0) == 0


@pytest.mark.parametrize(
    "field, value",
    [("max_tokens", -1), ("max_cost", -0.5), ("max_cost", float("nan")), ("max_seconds", 0.0)],
)
def test_wrong_budgets_are_refused_up_front(ctx, field, value):
    with pytest.raises(InvalidContextError, match=field):
        ctx(**{field: value})


def test_the_approval_shows_what_the_plan_will_cost_and_its_slowest_chain(use_models, ctx):
    from langchain_core.tools import tool

    from planexec.tools import ToolRegistry

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    @tool
    def index(text: str) -> str:
        """Index a text."""
        return text

    tools = ToolRegistry()
    tools.register(fetch, typical_latency=2.0)
    tools.register(index, typical_latency=0.5)
    plan = plan_of(
        step(1, "fetch", {"url": "a"}),
        step(2, None, {"about": "$1"}, [1], expected="a summary"),
        step(3, "index", {"text": "$2"}, [2]),
        step(4, "index", {"text": "side"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    config = thread()
    prices = {
        "test:planner": {"input": 2.0, "output": 8.0},
        "test:executor": {"input": 0.4, "output": 1.6},
    }
    run_ctx = ctx(max_tokens=50_000, max_cost=0.5, model_prices=prices, max_executor_turns=3)
    out = graph.invoke({"task": "summarise a page"}, config, context=run_ctx)
    request = out["__interrupt__"][0].value
    found = request["estimate"]
    used = graph.get_state(config).values["usage"]["planner"]
    assert found["spent"]["calls"] == 1
    assert found["spent"]["tokens"] == used["input_tokens"] + used["output_tokens"]
    assert found["spent"]["cost"] == pytest.approx(
        (used["input_tokens"] * 2.0 + used["output_tokens"] * 8.0) / 1e6
    )
    assert found["expected"]["calls"] == (1, 3)  # one model step, 1 to 3 turns, no judge
    low, high = found["expected"]["tokens"]
    assert 0 < low < high == pytest.approx(3 * low, rel=0.01)
    assert found["expected"]["cost"][0] > 0
    assert found["time"] == {"chain": [1, 2, 3], "seconds": 2.5, "undeclared": 1}
    assert found["budgets"] == {"max_tokens": 50_000.0, "max_cost": 0.5}
    text = request["description"]
    assert "Expected for this plan: 1–3 model calls" in text
    assert "Slowest chain: steps 1 → 2 → 3, about 2.5 s plus 1 step of unknown time." in text
    assert "Budgets of this run: at most 50,000 tokens · \\$0.5000." in text  # not LaTeX


def test_the_cli_shows_the_estimate_and_ends_a_run_on_its_token_budget(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    plan = plan_of(step(1, "write_file", {"path": "a.txt", "content": "hi"}))
    (tmp_path / "planner.json").write_text(
        json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}])
    )
    common = ["--planner-model", f"scripted:{tmp_path / 'planner.json'}", "--db", "runs.sqlite"]
    shown = CliRunner().invoke(
        app, ["run", "write a", *common, "--workspace", "ws", "--max-tokens", "100000"], input="c\n"
    )
    assert "Expected for this plan: 0 model calls, about 0 tokens" in shown.output, shown.output
    assert "Spent so far: 1 model call, " in shown.output
    assert "Budgets of this run: at most 100,000 tokens." in shown.output

    spent = CliRunner().invoke(
        app, ["run", "write a", *common, "--workspace", "ws2", "--max-tokens", "1", "--yes"]
    )
    assert spent.exit_code == 1, spent.output
    assert "the token budget is spent" in spent.output, spent.output
    assert not (tmp_path / "ws2" / "a.txt").exists()  # no step started
    refused = CliRunner().invoke(app, ["run", "write a", *common, "--max-seconds", "0"])
    assert refused.exit_code == 2 and "max_seconds" in refused.output, refused.output


class NoUsage(FixedUsage):
    """An executor model whose replies report no usage metadata (some local servers)."""

    delay: float = 0.0

    def _reply(self) -> ChatResult:
        message = AIMessage(content="Final: ok")
        return ChatResult(generations=[ChatGeneration(message=message)])


def test_a_reply_without_usage_metadata_counts_as_a_call_of_zero_tokens(use_models, ctx):
    """What the endpoint does not report is not invented: the call counts, its tokens are 0,
    so a token or cost budget cannot stop such a model (the call count still shows it)."""
    executor = NoUsage(lock=threading.Lock())
    use_models(planner=scripted(plan_reply(SIX_MODEL_STEPS)), executor=executor)
    graph = build_graph(checkpointer=InMemorySaver())
    config = thread()
    graph.invoke({"task": "six parts"}, config, context=ctx(max_replans=0))
    planner = graph.get_state(config).values["usage"]["planner"]
    limit = planner["input_tokens"] + planner["output_tokens"] + 1
    run_ctx = ctx(max_replans=0, max_parallel_steps=2, max_tokens=limit)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=run_ctx)
    assert executor.calls == 6 and out["final"]["status"] == "succeeded", out["final"]
    assert out["usage"]["executor"] == {"calls": 6, "input_tokens": 0, "output_tokens": 0}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_that_ends_over_its_budget_says_so(use_models, ctx, mode):
    # under "never" a step starts as its line streams, while the planner's call is in flight:
    # its tokens are counted when the reply ends, so the run may finish over a token budget
    # (the documented overshoot by calls in flight); whether the steps ran or were skipped,
    # the result must name the budget that was passed
    from planexec.llm.scripted import ScriptedChatModel

    plan = plan_of(step(1, "echo", {"text": "a"}), step(2, "echo", {"text": "b"}))
    planner = ScriptedChatModel(replies=[plan_reply(plan)], stream_chunk_chars=25)
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]), approval="never")
    limits = ctx(approval="never", max_tokens=100)
    if mode == "sync":
        out = graph.invoke({"task": "two echoes"}, thread(), context=limits)
    else:
        out = asyncio.run(graph.ainvoke({"task": "two echoes"}, thread(), context=limits))
    spent = out["usage"]["planner"]["input_tokens"] + out["usage"]["planner"]["output_tokens"]
    assert spent > 100 and out["plan"]["version"] == 1, out.get("error")
    assert out["final"]["budget"] == {"budget": "tokens", "limit": 100, "spent": spent}, out[
        "final"
    ]
