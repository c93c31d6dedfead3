"""Model and tool calls as callbacks, traces and streams see them: scrubbed of secrets.

LangChain reports every model and tool call to the run's callbacks: tracers (LangSmith or
any other), LangGraph's ``messages`` stream, ``astream_events`` and the server's ``events``
mode. planexec runs each real call *quietly* (no callbacks inherited, LangSmith tracing off)
and shows callbacks a stand-in run instead, whose inputs and outputs are scrubbed
(:func:`planexec.secrets.redact`): a model that repeats a key, or a tool that returns,
raises or streams one, shows ``[redacted]`` everywhere and nowhere the value.

* :class:`ScrubbedChatModel` wraps a chat model (``models.load_chat_model`` returns every
  model this way). It never streams tokens: a secret split across tokens could not be
  recognised, so the ``messages`` stream gets each reply whole, scrubbed.
* :class:`ToolRun` is the stand-in of one tool call (``execution.calls`` makes it); the real
  call runs inside :func:`quiet` with :func:`quiet_config`, whose stream writer scrubs what
  the tool itself writes to the ``custom`` stream.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    BaseCallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    message_chunk_to_message,
)
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, ensure_config
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langchain_core.tracers.context import tracing_v2_callback_var
from langgraph._internal._constants import CONFIG_KEY_RUNTIME
from langgraph.runtime import Runtime
from langsmith.run_helpers import tracing_context
from pydantic import ConfigDict

from planexec.secrets import redact, secret_values

ERROR_TEXT_ATTRIBUTES = ("message", "msg", "detail", "strerror", "filename", "filename2")

PartialReply = Callable[[BaseMessage], None]
"""Called with each streamed chunk of a reply as it arrives (raw: not scrubbed)."""

_watcher: ContextVar[PartialReply | None] = ContextVar("planexec_reply_watcher", default=None)


@contextmanager
def watching(listener: PartialReply) -> Iterator[None]:
    """While inside, scrubbed models stream their wrapped model and show ``listener`` the reply.

    The listener gets each raw chunk as it arrives: it must scrub what it passes on.
    Callbacks, traces and ``messages`` streams still see only the whole scrubbed reply.
    """
    token = _watcher.set(listener)
    try:
        yield
    finally:
        _watcher.reset(token)


# Models whose server answered a streamed request with no chunk, by id (compared by identity:
# an id reused by a new model does not match); planexec's model instances are cached.
_cannot_stream: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def _joined(chunks: list[BaseMessage]) -> BaseMessage:
    """Join a streamed reply's chunks in one merge (adding them one by one is quadratic)."""
    first, rest = chunks[0], chunks[1:]
    if isinstance(first, BaseMessageChunk) and rest:
        first = first + rest  # a list: merged at once
    if isinstance(first, BaseMessageChunk):
        return message_chunk_to_message(first)
    return first  # a model that cannot stream sends one whole message


@contextmanager
def quiet() -> Iterator[None]:
    """Run the enclosed calls untraced: LangSmith tracing off, also under ``tracing_v2_enabled``.

    Together with :func:`quiet_config` (no inherited callbacks) nothing reports these calls.
    """
    token = tracing_v2_callback_var.set(None)
    try:
        with tracing_context(enabled=False):
            yield
    finally:
        tracing_v2_callback_var.reset(token)


def quiet_config(secrets: list[str]) -> RunnableConfig:
    """Config of a quiet call made inside a graph task: no callbacks, a scrubbing stream writer.

    LangGraph keeps the task's runtime (and the ``get_stream_writer()`` it hands out) under a
    private configurable key; there is no public way to give a nested call another writer.
    """
    config: RunnableConfig = {"callbacks": []}
    configurable = dict(ensure_config().get("configurable") or {})
    runtime = configurable.get(CONFIG_KEY_RUNTIME)
    if isinstance(runtime, Runtime):
        write = runtime.stream_writer

        def scrubbed_write(chunk: Any) -> None:
            write(redact(chunk, secrets))

        configurable[CONFIG_KEY_RUNTIME] = runtime.override(stream_writer=scrubbed_write)
        config["configurable"] = configurable
    return config


def observed(config: RunnableConfig | None = None) -> bool:
    """Say whether any callback handler (a tracer, a stream) would see a call made here."""
    callbacks = ensure_config(config).get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers)
    return bool(callbacks)


def scrub_exception(exc: BaseException, secrets: list[str]) -> None:
    """Scrub an exception's message (and its causes') in place, keeping its type."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(arg, secrets) for arg in current.args)
        for name in ERROR_TEXT_ATTRIBUTES:
            value = getattr(current, name, None)
            if isinstance(value, str):
                with contextlib.suppress(AttributeError):  # a read-only property
                    setattr(current, name, redact(value, secrets))
        current = current.__cause__ or current.__context__


class ScrubbedChatModel(BaseChatModel):
    """A chat model whose calls callbacks, traces and streams see only scrubbed.

    The prompt is scrubbed before the run is reported, the reply (text, tool calls and their
    arguments, metadata) before it is returned, and errors keep their type with scrubbed
    messages (retry policies still recognise them). The wrapped model runs quietly.
    """

    inner: Runnable[LanguageModelInput, BaseMessage]
    disable_streaming: bool = True
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def around(cls, model: BaseChatModel) -> ScrubbedChatModel:
        """Wrap ``model`` (a model that is already wrapped is returned as it is)."""
        return model if isinstance(model, ScrubbedChatModel) else cls(inner=model)

    @property
    def _llm_type(self) -> str:
        return "planexec-scrubbed"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"inner": self._base_name()}

    def __repr__(self) -> str:
        """Name the wrapped model only: a repr lands in traces (``serialized``)."""
        return f"ScrubbedChatModel({self._base_name()})"

    def _base(self) -> BaseChatModel | None:
        inner = self.inner
        if isinstance(inner, RunnableBinding):
            inner = inner.bound
        return inner if isinstance(inner, BaseChatModel) else None

    def _base_name(self) -> str:
        base = self._base()
        return type(base).__name__ if base is not None else type(self.inner).__name__

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        base = self._base()
        if base is None:
            return super()._get_ls_params(stop=stop, **kwargs)
        return base._get_ls_params(stop=stop, **kwargs)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> ScrubbedChatModel:
        """Bind tools to the wrapped model; the result is scrubbed the same way."""
        base = self.inner
        if not isinstance(base, BaseChatModel):
            raise TypeError("bind_tools needs a ScrubbedChatModel around a chat model")
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return ScrubbedChatModel(inner=base.bind_tools(tools, **kwargs))

    def generate(self, messages: list[list[BaseMessage]], *args: Any, **kwargs: Any) -> LLMResult:
        """Scrub the prompts, then generate (callbacks see the scrubbed prompts)."""
        return super().generate([redact(m) for m in messages], *args, **kwargs)

    async def agenerate(
        self, messages: list[list[BaseMessage]], *args: Any, **kwargs: Any
    ) -> LLMResult:
        """Scrub the prompts, then generate (callbacks see the scrubbed prompts)."""
        return await super().agenerate([redact(m) for m in messages], *args, **kwargs)

    def _streamed(
        self, messages: list[BaseMessage], kwargs: dict[str, Any], watch: PartialReply
    ) -> BaseMessage:
        """Stream the raw reply, showing ``watch`` each chunk.

        A server that cannot stream (a streamed request gives no chunk) is asked once more
        without streaming, and from then on without streaming at all.
        """
        chunks: list[BaseMessage] = []
        base = self._base() or self.inner
        if _cannot_stream.get(id(base)) is not base:
            try:
                for chunk in self.inner.stream(messages, {"callbacks": []}, **kwargs):
                    chunks.append(chunk)
                    watch(chunk)
            except ValueError:  # langchain: "No generation chunks were returned"
                if chunks:
                    raise
                _cannot_stream[id(base)] = base
        if chunks:
            return _joined(chunks)
        reply = self.inner.invoke(messages, {"callbacks": []}, **kwargs)
        watch(reply)
        return reply

    async def _astreamed(
        self, messages: list[BaseMessage], kwargs: dict[str, Any], watch: PartialReply
    ) -> BaseMessage:
        """Stream the raw reply (async), like :meth:`_streamed`."""
        chunks: list[BaseMessage] = []
        base = self._base() or self.inner
        if _cannot_stream.get(id(base)) is not base:
            try:
                async for chunk in self.inner.astream(messages, {"callbacks": []}, **kwargs):
                    chunks.append(chunk)
                    watch(chunk)
            except ValueError:  # langchain: "No generation chunks were returned"
                if chunks:
                    raise
                _cannot_stream[id(base)] = base
        if chunks:
            return _joined(chunks)
        reply = await self.inner.ainvoke(messages, {"callbacks": []}, **kwargs)
        watch(reply)
        return reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        secrets = secret_values()
        if stop is not None:
            kwargs["stop"] = stop
        # A provider model's bound tools (a RunnableBinding) merge the caller's config back
        # in, callbacks included: run the raw call outside of any parent config.
        caller = copy_context()  # the watcher streams from the caller's graph task
        token = var_child_runnable_config.set(None)
        try:
            with quiet():
                watcher = _watcher.get()
                if watcher is None:
                    reply = self.inner.invoke(messages, {"callbacks": []}, **kwargs)
                else:
                    reply = self._streamed(messages, kwargs, lambda m: caller.run(watcher, m))
        except Exception as exc:
            scrub_exception(exc, secrets)
            raise
        finally:
            var_child_runnable_config.reset(token)
        return _scrubbed_result(reply, secrets)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        secrets = secret_values()
        if stop is not None:
            kwargs["stop"] = stop
        # A provider model's bound tools (a RunnableBinding) merge the caller's config back
        # in, callbacks included: run the raw call outside of any parent config.
        caller = copy_context()  # the watcher streams from the caller's graph task
        token = var_child_runnable_config.set(None)
        try:
            with quiet():
                watcher = _watcher.get()
                if watcher is None:
                    reply = await self.inner.ainvoke(messages, {"callbacks": []}, **kwargs)
                else:
                    reply = await self._astreamed(
                        messages, kwargs, lambda m: caller.run(watcher, m)
                    )
        except Exception as exc:
            scrub_exception(exc, secrets)
            raise
        finally:
            var_child_runnable_config.reset(token)
        return _scrubbed_result(reply, secrets)


def _scrubbed_result(reply: BaseMessage, secrets: list[str]) -> ChatResult:
    if not isinstance(reply, BaseMessage):
        reply = AIMessage(content=str(reply))
    return ChatResult(generations=[ChatGeneration(message=redact(reply, secrets))])


class ToolRun(BaseTool):
    """The stand-in callbacks see of one tool call: its name, and what ``work`` returns.

    Invoke it with the call's scrubbed arguments; ``work`` makes the real call quietly and
    returns a scrubbed result or raises an error with a scrubbed message.
    """

    work: Callable[[], Awaitable[Any]]
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def of(cls, tool: BaseTool, work: Callable[[], Awaitable[Any]]) -> ToolRun:
        """Make the stand-in of a call of ``tool``."""
        return cls(
            name=tool.name,
            description=tool.description,
            tags=tool.tags,
            metadata=tool.metadata,
            work=work,
        )

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        return await self.work()

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a ToolRun is awaited: use ainvoke")
