"""The chat face of a run: a task comes as a human message, the answer goes back as an AI one.

Studio's chat mode and Agent Chat UI speak ``messages``: a run may start from
``{"messages": [{"role": "user", "content": "Sum the sales"}]}`` as well as from
``{"task": "Sum the sales"}``. Either way the thread's ``messages`` hold the task as a human
message and the finalizer's answer as an AI one; a new human message on a finished thread
starts a new task, with a new approval. Each approval is asked under an AI message showing the
plan (and why a previous answer was refused): chat UIs draw an interrupt's controls under the
last message only when it is an AI message.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages

from planexec.review.describe import escaped, markdown_prose
from planexec.review.request import ApprovalRequest
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
    """Return the run's answer as the chat shows it: the answer (no images), then its files."""
    # a chat UI renders the answer as Markdown: no image (the reader's browser would fetch it
    # at once) and no math ("$5 and $6" is a LaTeX formula there), final["answer"] unchanged
    text = final["answer"]
    if final["artifacts"]:
        text += "\n\nFiles: " + ", ".join(final["artifacts"])
    return AIMessage(markdown_prose(text), name="planexec")


def approval_message(request: ApprovalRequest, position: int) -> AIMessage:
    """Return the chat message an approval is asked under: the plan, and any refusal's reason.

    ``position`` (the number of messages before it) makes its id unique in the thread.
    """
    error = request["error"]
    lines = [f"**Your answer was not accepted:** {escaped(error, 4000)}", ""] if error else []
    lines.append(request["description"])
    allowed = request["review_configs"][0]["allowed_decisions"]
    lines += ["", f"This plan awaits your decision: {', '.join(allowed)}."]
    message_id = f"planexec-approval-{position}-{request['digest'][:12]}"
    return AIMessage("\n".join(lines), name="planexec", id=message_id)
