"""The chat face of a run: a task comes as a human message, the answer goes back as an AI one.

Studio's chat mode and Agent Chat UI speak ``messages``: a run may start from
``{"messages": [{"role": "user", "content": "Sum the sales"}]}`` as well as from
``{"task": "Sum the sales"}``. Either way the thread's ``messages`` hold the task as a human
message (so a UI always has a message at the approval) and the finalizer's answer as an AI one;
a new human message on a finished thread starts a new task, with a new approval.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages

from planexec.state import FinalResult


def message_text(message: BaseMessage) -> str:
    """Return a message's text: its string content, or its text blocks joined."""
    if isinstance(message.content, str):
        return message.content
    parts = [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in message.content
        if isinstance(block, str) or block.get("type") == "text"
    ]
    return "\n".join(p for p in parts if p)


def input_task(value: dict[str, Any]) -> str | None:
    """Return the task a run's input asks for: the last human message's text, else ``task``.

    Raise ``ValueError`` (from LangChain) for messages that are not messages.
    """
    raw = value.get("messages")
    if raw:
        messages = convert_to_messages(raw if isinstance(raw, list) else [raw])
        if isinstance(messages[-1], HumanMessage):
            return message_text(messages[-1])
    task = value.get("task")
    return task if isinstance(task, str) else None


def answer_message(final: FinalResult) -> AIMessage:
    """Return the run's answer as the chat shows it: the answer, then the files it made."""
    text = final["answer"]
    if final["artifacts"]:
        text += "\n\nFiles: " + ", ".join(final["artifacts"])
    return AIMessage(text, name="planexec")
