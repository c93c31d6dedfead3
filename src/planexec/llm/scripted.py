"""A scripted chat model: replays recorded replies, for offline runs, demos and tests.

Replies with a ``match`` regex answer any prompt containing a match (reusable, so a
killed and resumed process, or a server handling many runs, gets the same answers);
replies without one are used once each, in order, when no ``match`` reply fits.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCallChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from planexec.errors import ConfigurationError


class ScriptedReply(BaseModel):
    """One recorded reply: text, tool calls, and optionally the prompt it answers."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    match: str | None = None


def _text(message: BaseMessage) -> str:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    calls = getattr(message, "tool_calls", None)
    return text + (json.dumps(calls, default=str) if calls else "")


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script instead of a network service."""

    replies: list[ScriptedReply] = Field(default_factory=list)
    _cursor: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _ids: Any = PrivateAttr(default_factory=itertools.count)
    prompts: list[str] = Field(default_factory=list, exclude=True)
    stream_chunk_chars: int = Field(default=0, ge=0)
    """Stream replies in pieces of this many characters (0: whole replies, no streaming)."""
    disable_streaming: bool | Literal["tool_calling"] = True

    @model_validator(mode="after")
    def _streams_when_asked(self) -> ScriptedChatModel:
        self.disable_streaming = not self.stream_chunk_chars
        return self

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedChatModel:
        """Load a script: a JSON list of replies, or ``{"replies": [...]}``.

        ``{"replies": [...], "stream_chunk_chars": 40}`` streams replies in 40-character pieces.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigurationError(f"cannot read scripted model file {path}: {exc}") from None
        replies: Any = data.get("replies") if isinstance(data, dict) else data
        chunk: Any = data.get("stream_chunk_chars", 0) if isinstance(data, dict) else 0
        try:
            return cls(
                replies=[ScriptedReply.model_validate(r) for r in replies], stream_chunk_chars=chunk
            )
        except (TypeError, ValidationError) as exc:  # one line, without the file's content
            where = (
                "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                    for e in exc.errors(include_url=False, include_input=False)[:3]
                )
                if isinstance(exc, ValidationError)
                else "not a list of replies"
            )
            raise ConfigurationError(f"scripted model file {path} is not valid: {where}") from None

    @property
    def _llm_type(self) -> str:
        return "planexec-scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Accept tools like a real model; the script decides which calls come back.

        This is all ``with_structured_output`` (function calling) needs of a chat model.
        """
        return self

    def _pick(self, prompt: str) -> ScriptedReply:
        with self._lock:
            self.prompts.append(prompt)
            for reply in self.replies:
                if reply.match is not None and re.search(reply.match, prompt, re.DOTALL):
                    return reply
            while self._cursor < len(self.replies):
                reply = self.replies[self._cursor]
                self._cursor += 1
                if reply.match is None:
                    return reply
        raise ValueError(f"the scripted model has no reply left for: {prompt[-300:]!r}")

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """Stream the scripted reply: its text, then each tool call's arguments, in pieces."""
        whole = self._generate(messages, stop, None, **kwargs).generations[0].message
        size = self.stream_chunk_chars or 1
        yield ChatGenerationChunk(message=AIMessageChunk(content=""))  # as providers start
        text = whole.content if isinstance(whole.content, str) else ""
        for start in range(0, len(text), size):
            yield ChatGenerationChunk(message=AIMessageChunk(content=text[start : start + size]))
        for index, call in enumerate(getattr(whole, "tool_calls", None) or []):
            args = json.dumps(call["args"], default=str)
            for start in range(0, len(args) or 1, size):
                first = start == 0
                piece = ToolCallChunk(
                    name=call["name"] if first else None,
                    args=args[start : start + size],
                    id=call["id"] if first else None,
                    index=index,
                )
                yield ChatGenerationChunk(
                    message=AIMessageChunk(content="", tool_call_chunks=[piece])
                )
        usage = getattr(whole, "usage_metadata", None)
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(_text(m) for m in messages)
        reply = self._pick(prompt)
        calls = [
            {
                "name": c["name"],
                "args": c.get("args", {}),
                "id": c.get("id") or f"call_{next(self._ids)}",
            }
            for c in reply.tool_calls
        ]
        output_chars = len(reply.content) + len(json.dumps(calls))
        message = AIMessage(
            content=reply.content,
            tool_calls=calls,
            usage_metadata={
                "input_tokens": len(prompt) // 4,
                "output_tokens": output_chars // 4,
                "total_tokens": (len(prompt) + output_chars) // 4,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
