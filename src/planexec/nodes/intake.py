"""Intake node: each new run's task, from a new human message or from ``task``, in the chat.

A new human message at the end of ``messages`` is the task; a task message sent again with
its id and new text (a chat UI's "edit message") is the task in its new words; otherwise the
``task`` given is recorded as a human message, so ``messages`` is never empty at the approval.
Who started the run (:func:`planexec.review.identity.who_started`) is recorded as ``started_by``.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from planexec.nodes.conversation import message_text
from planexec.review.identity import who_started
from planexec.state import State


def take_task(state: State, config: RunnableConfig) -> dict[str, Any]:
    """Return the run's task, the human message that carries it, and who started the run."""
    return {**_task(state), "started_by": who_started(config)}


def _task(state: State) -> dict[str, Any]:
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and last.id != state.get("task_message"):
        return _from(last)
    asked = next((m for m in messages if m.id == state.get("task_message")), None)
    if isinstance(asked, HumanMessage) and message_text(asked) != state.get("task_text"):
        return _from(asked)  # the task message, edited in place (same id, new words)
    message = HumanMessage(state["task"], id=str(uuid.uuid4()))
    return {"messages": [message], **_from(message)}


def _from(message: HumanMessage) -> dict[str, Any]:
    text = message_text(message)
    return {"task": text, "task_message": message.id, "task_text": text}
