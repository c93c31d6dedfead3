"""Nothing a tool returns or a model sends wedges a thread (issue 9, section 2).

Each case runs on the in-memory saver and on PostgreSQL (JSONB refuses NUL; msgpack refuses
deep nesting, big integers and numpy values): the run ends, and the thread takes a new task.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"down": value}
    return value


@tool
def pandas_mean() -> float:
    """Return the mean of a pandas Series (a numpy.float64)."""
    return pd.Series([1.0, 2.0, 4.5]).mean()  # type: ignore[no-any-return]


@tool
def python_values() -> dict:
    """Return a dict of numpy, pandas and Python values that are not plain JSON."""
    return {
        "mean": np.float64(2.5),
        "count": np.int64(3),
        "ok": np.bool_(True),
        "when": pd.Timestamp("2024-01-02 03:04:05"),
        "day": np.datetime64("2024-01-02"),
        "nat": pd.NaT,
        "na": pd.NA,
        "price": decimal.Decimal("1234.50"),
        "date": dt.date(2024, 1, 2),
        "took": dt.timedelta(minutes=1),
        "raw": b"\xff\x00",
        "tags": {"b", "a"},
        "pair": (1, 2),
        "array": np.arange(3),
        "series": pd.Series([1, 2], index=["x", "y"]),
        "big": 2**70,
        "nul": "a\x00b",
    }


@tool
def deep_value(depth: int) -> Any:
    """Return a value nested ``depth`` levels deep."""
    return nested(depth)


@tool
def raises_nul() -> str:
    """Fail with NUL and lone-surrogate characters in the message."""
    raise ValueError("bad\x00byte and \ud800 surrogate")


TOOLS = ToolRegistry([pandas_mean, python_values, deep_value, raises_nul, echo])


@contextmanager
def saver_for(kind: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(request.getfixturevalue("postgres_url")) as saver:
        saver.setup()
        yield saver


@pytest.fixture(params=["memory", "postgres"])
def graph(request):
    with saver_for(request.param, request) as saver:
        yield build_graph(checkpointer=saver, tools=TOOLS)


def run(graph, ctx_obj, plan) -> tuple[dict, dict]:
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    graph.invoke({"task": "t"}, config, context=ctx_obj)
    return graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj), config


def still_usable(graph, config, ctx_obj, use_models) -> None:
    """The thread takes a new task and runs it to the end (asking first, as the policy says)."""
    use_models(planner=scripted(plan_reply(plan_of(step(1, "echo", {"text": "again"})))))
    out = graph.invoke({"task": "a new task"}, config, context=ctx_obj)
    if "__interrupt__" in out:
        assert out["__interrupt__"][0].value["plan"]["steps"][0]["args"] == {"text": "again"}
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx_obj)
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["1"]["output"] == "again"


def test_numpy_pandas_and_python_values_are_stored_by_the_rule(graph, use_models, ctx):
    plan = plan_of(
        step(1, "pandas_mean"),
        step(2, "python_values"),
        step(3, "echo", {"text": "mean ${1}, when $2.when"}, [1, 2]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    out, config = run(graph, ctx(), plan)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["steps"]["1"]["output"] == 2.5
    assert out["steps"]["2"]["output"] == {
        "mean": 2.5,
        "count": 3,
        "ok": True,
        "when": "2024-01-02T03:04:05",
        "day": "2024-01-02",
        "nat": None,
        "na": None,
        "price": "1234.50",
        "date": "2024-01-02",
        "took": 60.0,
        "raw": "/wA=",
        "tags": ["a", "b"],
        "pair": [1, 2],
        "array": [0, 1, 2],
        "series": {"x": 1, "y": 2},
        "big": str(2**70),
        "nul": "a\ufffdb",
    }
    assert out["steps"]["3"]["output"] == "mean 2.5, when 2024-01-02T03:04:05"
    still_usable(graph, config, ctx(), use_models)


@pytest.mark.parametrize("depth", [65, 260, 300])
def test_a_deeply_nested_tool_output_fails_only_its_own_step(graph, use_models, ctx, depth):
    plan = plan_of(
        step(1, "deep_value", {"depth": depth}),
        step(2, "echo", {"text": "$1"}, [1]),
        step(3, "echo", {"text": "independent"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    out, config = run(graph, ctx(max_replans=0), plan)
    assert out["steps"]["1"]["status"] == "failed"
    assert "the output cannot be stored" in out["steps"]["1"]["error"]
    assert "nested more than 64 levels deep" in out["steps"]["1"]["error"]
    assert len(out["steps"]["1"]["error"]) < 500
    assert out["steps"]["2"]["status"] == "skipped"
    assert out["steps"]["3"]["output"] == "independent"
    assert out["final"]["status"] == "partial"
    still_usable(graph, config, ctx(), use_models)


def test_nul_and_surrogates_in_a_tool_error_are_stored(graph, use_models, ctx):
    plan = plan_of(step(1, "raises_nul"), step(2, "echo", {"text": "fine"}))
    use_models(planner=scripted(plan_reply(plan)))
    out, config = run(graph, ctx(max_replans=0), plan)
    assert out["steps"]["1"]["error"] == "ValueError: bad\ufffdbyte and \ufffd surrogate"
    assert out["final"]["status"] == "partial"
    still_usable(graph, config, ctx(), use_models)


def test_planner_args_nested_too_deep_go_back_to_the_planner(graph, use_models, ctx):
    deep = plan_of(step(1, "echo", {"text": nested(280)}))
    planner = use_models(
        planner=scripted(plan_reply(deep), plan_reply(plan_of(step(1, "echo", {"text": "ok"}))))
    )["planner"]
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = graph.invoke({"task": "t"}, config, context=ctx())
    assert out["__interrupt__"][0].value["plan"]["steps"][0]["args"] == {"text": "ok"}
    assert "nested more than 64 levels deep" in planner.prompts[1]


class InvalidCallModel(BaseChatModel):
    """A model whose Plan tool call cannot be parsed, with a NUL in the raw arguments."""

    @property
    def _llm_type(self) -> str:
        return "invalid-call"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        bad = {"name": "Plan", "args": '{"goal": "\x00', "id": "1", "error": "raw: {\x00 \ud800"}
        message = AIMessage(content="", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def test_a_planner_reply_with_nul_in_its_error_ends_cleanly(graph, use_models, ctx):
    use_models(planner=InvalidCallModel())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = graph.invoke({"task": "t"}, config, context=ctx(max_plan_repairs=1))
    assert out["final"]["status"] == "failed"
    assert "\x00" not in out["error"] and "\ufffd" in out["error"]
    still_usable(graph, config, ctx(), use_models)


def test_a_judge_reason_with_nul_is_stored(graph, use_models, ctx):
    from planexec.llm.scripted import ScriptedReply

    judge = scripted(
        ScriptedReply(
            tool_calls=[
                {
                    "name": "Verdicts",
                    "args": {"verdicts": [{"step": 1, "ok": False, "reason": "n\x00"}]},
                }
            ],
            match=".",
        )
    )
    plan = plan_of(step(1, "echo", {"text": "x"}))
    use_models(planner=scripted(plan_reply(plan)), evaluator=judge)
    out, config = run(graph, ctx(llm_judge=True, max_replans=0), plan)
    assert out["steps"]["1"]["error"] == "judge: n\ufffd"
    assert out["final"]["status"] == "failed"
    still_usable(graph, config, ctx(), use_models)


def test_absurd_token_counts_from_a_model_do_not_break_the_checkpoint(graph, use_models, ctx):
    class Greedy(InvalidCallModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            call = {"name": "Plan", "args": plan_of(step(1, "echo", {"text": "x"})), "id": "1"}
            message = AIMessage(content="", tool_calls=[call])
            message.usage_metadata = {  # type: ignore[typeddict-item]
                "input_tokens": 10**30,
                "output_tokens": "many",
                "total_tokens": -5,
            }
            return ChatResult(generations=[ChatGeneration(message=message)])

    use_models(planner=Greedy())
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = graph.invoke({"task": "t"}, config, context=ctx())
    assert "__interrupt__" in out
    usage = graph.get_state(config).values["usage"]["planner"]
    assert usage["calls"] == 1 and 0 <= usage["input_tokens"] < 2**63
    assert usage["output_tokens"] == 0


@pytest.mark.parametrize(
    "content",
    [b'{"goal": 1' + b"9" * 5000 + b"}", b"\xff\xfe not utf-8"],
    ids=["digits", "not-utf8"],
)
def test_a_plan_file_no_parser_reads_is_one_line(content, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").write_bytes(content)
    result = CliRunner().invoke(
        app, ["run", "--plan", "plan.json", "--yes", "--db", str(tmp_path / "r.db")]
    )
    assert result.exit_code == 2, result.output
    assert "plan file plan.json is not valid JSON" in result.output
    assert "Traceback" not in result.output


async def test_the_async_path_stores_by_the_same_rule(use_models, ctx):
    plan = plan_of(
        step(1, "python_values"),
        step(2, "deep_value", {"depth": 300}),
        step(3, "raises_nul"),
        step(4, "echo", {"text": "$1.when"}, [1]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    await graph.ainvoke({"task": "t"}, config, context=ctx(max_replans=0))
    out = await graph.ainvoke(
        Command(resume={"action": "approve"}), config, context=ctx(max_replans=0)
    )
    assert out["steps"]["1"]["output"]["mean"] == 2.5
    assert "nested more than 64 levels deep" in out["steps"]["2"]["error"]
    assert out["steps"]["3"]["error"] == "ValueError: bad\ufffdbyte and \ufffd surrogate"
    assert out["steps"]["4"]["output"] == "2024-01-02T03:04:05"
    assert out["final"]["status"] == "partial"
