"""Model steps before approval, through the real client: ``ChatOpenAI`` against a local server.

Under the operator's ``models`` mode a ``"tool": null`` step (its tools all read-only, closed
world) runs while the plan awaits approval: its executor model's request reaches the server
before the answer, what it spent lands in ``speculation_usage`` (the reported usage, over the
wire), and the approved plan takes its result without asking the model again. Under ``tools``
the model is never asked before the approval.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from tests.helpers import plan_of, plan_reply, scripted, step, thread
from tests.openai_server import Canned, serve

SENT: list[str] = []


@tool
def send(x: str) -> str:
    """Send x somewhere (a side effect)."""
    SENT.append(x)
    return f"sent {x}"


send.metadata = {"side_effects": True}

PLAN = plan_of(
    step(1, None, {}),  # the executor model writes it, with no tool
    step(2, "send", {"x": "$1"}, [1]),
)


@pytest.mark.parametrize("mode", ["models", "tools"])
def test_a_model_step_runs_before_approval_only_under_models(mode, monkeypatch):
    SENT.clear()
    canned = Canned([{"content": "a summary from the model", "match": "."}])
    with serve(canned) as (url, requests):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        graph = build_graph(
            InMemorySaver(),
            tools=[send],
            models={"planner": scripted(plan_reply(PLAN))},
            speculate=mode,
        )
        ctx = Context(speculate=True, executor_model="openai:local-executor", max_replans=0)
        config = thread()
        graph.invoke({"task": "t"}, config, context=ctx)  # sync: returns once speculation ended
        before: list[dict[str, Any]] = list(requests)
        state = graph.get_state(config).values
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx)
        after = list(requests)
    executor = [r for r in before if r["model"] == "local-executor"]
    assert out["final"]["status"] == "succeeded", out["final"]
    assert SENT == ["a summary from the model"]
    if mode == "models":
        assert len(executor) == 1  # asked before the answer
        assert state["speculation_usage"]["executor"]["input_tokens"] > 0
        assert not (state.get("usage") or {}).get("executor")  # counted apart
        assert out["steps"]["1"]["speculative"] is True
        assert len([r for r in after if r["model"] == "local-executor"]) == 1  # not asked again
    else:
        assert executor == []  # never before the approval
        assert "speculative" not in out["steps"]["1"]
        assert len([r for r in after if r["model"] == "local-executor"]) == 1
