"""Calls nobody sees, and the scrubbed stand-ins that callbacks see instead.

A real model or tool call runs inside :func:`quiet` with :func:`quiet_config` (no inherited
callbacks, LangSmith tracing off, a stream writer that scrubs); callbacks see a stand-in run
(:class:`ToolRun` for tools, :class:`planexec.llm.scrubbed.ScrubbedChatModel` for models) whose
inputs, outputs and errors are scrubbed (:func:`scrub_exception`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langchain_core.tracers.context import tracing_v2_callback_var
from langsmith.run_helpers import tracing_context
from pydantic import ConfigDict

from planexec.compat.langgraph import runtime_of, with_stream_writer
from planexec.redaction.secrets import redact

ERROR_TEXT_ATTRIBUTES = ("message", "msg", "detail", "strerror", "filename", "filename2")
ERROR_DATA_ATTRIBUTES = ("body", "code", "param", "doc")


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

    There is no public way to give a nested call another writer:
    :func:`planexec.compat.langgraph.with_stream_writer` does it.
    """
    config: RunnableConfig = {"callbacks": []}
    if not secrets:  # nothing to scrub: the call reads the task's own config, writer and all
        return config
    ambient = var_child_runnable_config.get()  # what ensure_config() copies, read as it is
    runtime = runtime_of(ambient)
    if ambient is not None and runtime is not None:
        write = runtime.stream_writer

        def scrubbed_write(chunk: Any) -> None:
            write(redact(chunk, secrets))

        configurable = ambient.get("configurable") or {}
        config["configurable"] = with_stream_writer(configurable, scrubbed_write)
    return config


def observed(config: RunnableConfig | None = None) -> bool:
    """Say whether any callback handler (a tracer, a stream) would see a call made here."""
    # ensure_config(config) would copy the whole config (and the callback manager) to read
    # one key: the config's own callbacks if set, else the ones of the run it is called in
    callbacks = config.get("callbacks") if config else None
    if callbacks is None:
        ambient = var_child_runnable_config.get()
        callbacks = ambient.get("callbacks") if ambient else None
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
        for name in ERROR_DATA_ATTRIBUTES:  # what a client kept of the reply (openai's .body)
            value = getattr(current, name, None)
            if isinstance(value, dict | list | str):
                with contextlib.suppress(AttributeError):
                    setattr(current, name, redact(value, secrets))
        current = current.__cause__ or current.__context__


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
