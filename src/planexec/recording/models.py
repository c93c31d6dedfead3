"""A model call as a recording keys it, and a reply as a recording keeps it.

The key is the SHA-256 of the call's role, the model's identity (its class, every setting it
calls with, scrubbed, and its endpoint; a scripted model's script: see
:func:`planexec.llm.calls.model_identity`), the messages (type, content,
name, tool calls, the tool call answered; not their ids, which are new on every run) and what
is bound to the model (tools, tool choice, structured output) or passed to it (``stop``).
"""

from __future__ import annotations

import math
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables import RunnableBinding
from pydantic import BaseModel

from planexec.recording.files import digest

MAX_ASKED_CHARS = 2000
"""Most characters of the request's last message kept in a model recording, for a reviewer."""


def plain(value: Any) -> Any:
    """Return ``value`` as JSON data, the same on every run (objects by their type's name)."""
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, BaseModel):
        try:
            return plain(value.model_dump(mode="json"))
        except Exception:  # a model that cannot dump itself: named by its type
            return type(value).__qualname__
    return type(value).__qualname__


def _message(message: BaseMessage) -> dict[str, Any]:
    shown: dict[str, Any] = {"type": message.type, "content": plain(message.content)}
    if message.name:
        shown["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        shown["tool_calls"] = [
            {"name": c["name"], "args": plain(c["args"]), "id": c.get("id")}
            for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        shown["tool_call_id"] = message.tool_call_id
    return shown


def model_call_key(
    role: str,
    identity: dict[str, Any],
    inner: object,
    messages: list[BaseMessage],
    kwargs: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """Return a model call's key (a hex digest) and the model's identity as JSON data.

    ``identity`` is the caller's (:func:`planexec.llm.calls.model_identity`): this package
    does not know models, only what a call is made of.
    """
    identity = plain(identity)
    bound = inner.kwargs if isinstance(inner, RunnableBinding) else {}
    material = {
        "role": role,
        "model": identity,
        "messages": [_message(m) for m in messages],
        "bound": plain(bound),
        "kwargs": plain(kwargs),
    }
    return digest(material), identity


def asked(messages: list[BaseMessage]) -> str:
    """Return the end of the request's last message, for a reviewer of the recording."""
    if not messages:
        return ""
    content = messages[-1].content
    text = content if isinstance(content, str) else str(plain(content))
    return text[-MAX_ASKED_CHARS:]


def reply_data(reply: BaseMessage) -> dict[str, Any]:
    """Return a reply as a recording keeps it: LangChain's dict of it, without its run's id."""
    data = message_to_dict(reply)
    data["data"] = {k: v for k, v in data["data"].items() if k != "id"}
    return data


def reply_of(data: dict[str, Any]) -> BaseMessage:
    """Return the reply a recording kept (raises ``KeyError``/``ValueError`` if malformed)."""
    (message,) = messages_from_dict([data])
    return message
