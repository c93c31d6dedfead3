"""Model and tool calls as callbacks, traces and streams see them: scrubbed of secrets.

LangChain reports every model and tool call to the run's callbacks: tracers (LangSmith or
any other), LangGraph's ``messages`` stream, ``astream_events`` and the server's ``events``
mode. planexec runs each real call *quietly* (no callbacks inherited, LangSmith tracing off)
and shows callbacks a stand-in run instead, whose inputs and outputs are scrubbed
(:func:`planexec.redaction.secrets.redact`): a model that repeats a key, or a tool that returns,
raises or streams one, shows ``[redacted]`` everywhere and nowhere the value.

* :class:`ScrubbedChatModel` wraps a chat model (``models.load_chat_model`` returns every
  model this way). It never streams tokens to callbacks: a secret split across tokens could
  not be recognised, so the ``messages`` stream gets each reply whole, scrubbed (a plan's
  steps are previewed whole, scrubbed, through :mod:`planexec.llm.replystream`).
* What a traced model run shows of the call is the wrapped model's own
  (:func:`planexec.llm.params.shown_params`):
  its ``_type``, model name, settings, bound tools and ``tool_choice`` in ``invocation_params``,
  its provider in the LangSmith metadata, and the reply's finish reason (``generation_info``)
  and ``response_metadata``; scrubbed, and without whatever could hold a credential (headers,
  fields named as keys or tokens, a URL's user, password and query).
* :class:`planexec.redaction.untraced.ToolRun` is the stand-in of one tool call (``execution.calls``
makes
  it); the real call runs inside :func:`planexec.redaction.untraced.quiet` with ``quiet_config``,
  whose
  stream writer scrubs what the tool itself writes to the ``custom`` stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import copy_context
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.runnables.config import var_child_runnable_config
from pydantic import ConfigDict

from planexec.llm import calls as modelcalls
from planexec.llm.calls import FINISH_KEYS, Limits, Request
from planexec.llm.params import shown_params
from planexec.llm.replystream import current_watcher
from planexec.redaction.secrets import redact, secret_values
from planexec.redaction.untraced import quiet, scrub_exception
from planexec.spending.budget import check_spending


class ScrubbedChatModel(BaseChatModel):
    """A chat model whose calls callbacks, traces and streams see only scrubbed.

    The prompt is scrubbed before the run is reported, the reply (text, tool calls and their
    arguments, metadata) before it is returned, and errors keep their type with scrubbed
    messages (retry policies still recognise them). The wrapped model runs quietly.
    """

    inner: Runnable[LanguageModelInput, BaseMessage]
    limits: Limits = Limits()
    """The time limits of each call (:mod:`planexec.llm.calls`)."""
    role: str = "model"
    """Whose model this is (planner, executor, evaluator), as errors name it."""
    disable_streaming: bool = True
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def around(
        cls, model: BaseChatModel, limits: Limits | None = None, role: str | None = None
    ) -> ScrubbedChatModel:
        """Wrap ``model`` (a wrapped one is unwrapped first), with a role's limits if given."""
        if isinstance(model, ScrubbedChatModel):
            if limits is None and role is None:
                return model
            return cls(inner=model.inner, limits=limits or model.limits, role=role or model.role)
        return cls(inner=model, limits=limits or Limits(), role=role or "model")

    @property
    def _llm_type(self) -> str:
        base = self._base()
        return base._llm_type if base is not None else "planexec-scrubbed"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        base = self._base()
        if base is None:
            return {"inner": self._base_name()}
        return shown_params(dict(base._identifying_params))

    def _get_invocation_params(
        self, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Return the wrapped model's invocation parameters, its bound tools included, scrubbed.

        What a run of the wrapped model would show (``_type``, model, settings, ``tools``,
        ``tool_choice``), so a traced call can be read and re-run as the model's own.
        """
        base = self._base()
        if base is None:
            return super()._get_invocation_params(stop, **kwargs)
        params = base._get_invocation_params(stop=stop, **{**self._bound(), **kwargs})
        if "stream" in params and current_watcher() is not None:
            params["stream"] = True  # a watched reply is asked for streamed (replystream)
        return shown_params(params)

    def __repr__(self) -> str:
        """Name the wrapped model only: a repr lands in traces (``serialized``)."""
        return f"ScrubbedChatModel({self._base_name()})"

    def _base(self) -> BaseChatModel | None:
        inner = self.inner
        if isinstance(inner, RunnableBinding):
            inner = inner.bound
        return inner if isinstance(inner, BaseChatModel) else None

    def _bound(self) -> dict[str, Any]:
        """Return what the wrapped model was bound with (tools, tool_choice...), if anything.

        Less what LangChain takes out of a call's arguments before it shows them (the format
        of a structured output, traced in the run's options).
        """
        inner = self.inner
        if not isinstance(inner, RunnableBinding):
            return {}
        return {k: v for k, v in inner.kwargs.items() if k not in TRACED_AS_OPTIONS}

    def _base_name(self) -> str:
        base = self._base()
        return type(base).__name__ if base is not None else type(self.inner).__name__

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        """Return the wrapped model's LangSmith metadata (provider, model name...), scrubbed.

        As its settings are (:func:`~planexec.llm.params.shown_params`): a model name that is
        a URL shows without its user, password and query.
        """
        base = self._base()
        if base is None:
            return super()._get_ls_params(stop=stop, **kwargs)
        return shown_params(dict(base._get_ls_params(stop=stop, **{**self._bound(), **kwargs})))

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
        return ScrubbedChatModel(
            inner=base.bind_tools(tools, **kwargs), limits=self.limits, role=self.role
        )

    def generate(self, messages: list[list[BaseMessage]], *args: Any, **kwargs: Any) -> LLMResult:
        """Scrub the prompts, then generate (callbacks see the scrubbed prompts).

        Every model call of a run comes through here or :meth:`agenerate`: once a budget of the
        run is spent (:mod:`planexec.spending.budget`), no call starts.
        """
        check_spending()
        return super().generate([redact(m) for m in messages], *args, **kwargs)

    async def agenerate(
        self, messages: list[list[BaseMessage]], *args: Any, **kwargs: Any
    ) -> LLMResult:
        """Scrub the prompts, then generate (callbacks see the scrubbed prompts)."""
        check_spending()
        return await super().agenerate([redact(m) for m in messages], *args, **kwargs)

    def _request(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Request:
        """Return the real call: to the wrapped model, within the role's limits, maybe watched.

        A watcher (:func:`planexec.llm.replystream.watching`) runs in the caller's graph task (its
        context), and gets the reply streamed; without one the reply is asked for whole.
        """
        if stop is not None:
            kwargs["stop"] = stop
        watcher, caller = current_watcher(), copy_context()
        watch = None if watcher is None else (lambda m: caller.run(watcher, m))
        return Request(self.inner, self._base(), messages, kwargs, self.limits, self.role, watch)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        secrets = secret_values()
        request = self._request(messages, stop, kwargs)
        with _raw_call(secrets):
            reply = modelcalls.request_reply_blocking(request)
        return _scrubbed_result(reply, secrets)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        secrets = secret_values()
        request = self._request(messages, stop, kwargs)
        with _raw_call(secrets):
            reply = await modelcalls.request_reply(request)
        return _scrubbed_result(reply, secrets)


@contextmanager
def _raw_call(secrets: list[str]) -> Iterator[None]:
    """Run the wrapped model's call quietly, outside any parent config; scrub what it raises.

    A provider model's bound tools (a RunnableBinding) merge the caller's config back in,
    callbacks included: the raw call runs with none. Errors keep their type, messages scrubbed.
    """
    token = var_child_runnable_config.set(None)
    try:
        with quiet():
            yield
    except Exception as exc:
        scrub_exception(exc, secrets)
        raise
    finally:
        var_child_runnable_config.reset(token)


def _scrubbed_result(reply: BaseMessage, secrets: list[str]) -> ChatResult:
    """Return the reply as a chat result, scrubbed; its finish reason in ``generation_info``.

    As the provider's own result has it (a reply asked whole or streamed alike), so a trace
    shows why the reply ended.
    """
    if not isinstance(reply, BaseMessage):
        reply = AIMessage(content=str(reply))
    said = reply.response_metadata or {}
    info = {key: said[key] for key in FINISH_KEYS if said.get(key) is not None} or None
    message = redact(reply, secrets)
    return ChatResult(generations=[ChatGeneration(message=message, generation_info=info)])


TRACED_AS_OPTIONS = frozenset({"ls_structured_output_format", "structured_output_format"})
"""Bound arguments a chat model's run shows as options, not invocation parameters."""
