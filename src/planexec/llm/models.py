"""Chat models by name: ``provider:model`` through LangChain's ``init_chat_model``.

Any provider whose integration package is installed works (``openai:gpt-4.1``,
``anthropic:claude-sonnet-4-5``, ``ollama:llama3.1``; ``openai`` also reaches any
OpenAI-compatible server through ``OPENAI_BASE_URL``), and ``scripted:PATH`` replays recorded
replies offline. A spec without a provider is an OpenAI model.

Nodes call ``models.load_chat_model(...)``, which returns every model scrubbed of secrets
(:class:`planexec.llm.scrubbed.ScrubbedChatModel`); tests patch ``provider_model``, the one place
that makes the provider's model.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import merge_configs
from langgraph.constants import TAG_NOSTREAM

from planexec.context import DEFAULT_TIMEOUTS, Context
from planexec.errors import ConfigurationError
from planexec.llm.calls import Limits
from planexec.llm.endpoint import shown_url
from planexec.llm.scrubbed import ScrubbedChatModel

MISSING_KEY = (
    "OPENAI_API_KEY is not set: export it, or point OPENAI_BASE_URL at an OpenAI-compatible "
    "server (Ollama, vLLM, llama.cpp) and set OPENAI_API_KEY to any value"
)


INTERNAL_TAGS = [TAG_NOSTREAM, "langsmith:nostream"]
"""Tags of planexec's own model calls (planner, replanner, judge): kept out of ``messages``
streams (LangGraph's ``nostream``; ``langsmith:nostream`` for LangSmith's UIs), so a chat shows
the run's answer, not plans and verdicts being written."""


def internal_call(name: str) -> RunnableConfig:
    """Return the current config for one internal model call: named, tagged not to stream."""
    return merge_configs(ensure_config(), {"run_name": name, "tags": INTERNAL_TAGS})


Role = Literal["planner", "executor", "evaluator"]
ROLES: tuple[Role, ...] = ("planner", "executor", "evaluator")


class ChatModels:
    """The chat model of each role: an instance given to ``build_graph``, else the run's spec.

    ``build_graph(models={"planner": ChatAnthropic(...)})`` pins a role's model for every run of
    that graph (the context's spec for that role is then not used); the replanner uses the
    planner's model. Every model is scrubbed of secrets, like :func:`load_chat_model`'s.
    """

    def __init__(self, instances: Mapping[str, BaseChatModel] | None = None) -> None:
        """Check the roles and wrap each given model once."""
        given = dict(instances or {})
        unknown = sorted(set(given) - set(ROLES))
        if unknown:
            raise ConfigurationError(
                f"unknown model role(s) {', '.join(map(repr, unknown))}: use {', '.join(ROLES)}"
            )
        for role, model in given.items():
            if not isinstance(model, BaseChatModel):
                raise ConfigurationError(
                    f"the {role} model must be a LangChain chat model, not a "
                    f"{type(model).__name__} (or give its name in the context)"
                )
        self._pinned = {
            role: ScrubbedChatModel.around(with_streamed_usage(m)) for role, m in given.items()
        }

    def for_role(self, role: Role, context: Context) -> BaseChatModel:
        """Return the role's model for a run: the pinned instance, else the one it names.

        Either way its calls keep the run's time limits for that role
        (``context.<role>_timeouts``, see :mod:`planexec.llm.calls`).
        """
        limits = limits_of(context, role)
        pinned = self._pinned.get(role)
        if pinned is not None:
            return ScrubbedChatModel.around(pinned, limits, role)
        return load_chat_model(getattr(context, f"{role}_model"), limits, role)


def with_streamed_usage(model: BaseChatModel) -> BaseChatModel:
    """Return ``model``, or a copy that asks for the token counts of its streamed replies.

    langchain-openai asks an OpenAI-compatible server for streamed usage
    (``stream_options: {"include_usage": true}``) only at OpenAI's own URL: a ``ChatOpenAI``
    (or any of its family, e.g. ``AzureChatOpenAI``) given another ``base_url`` would stream
    its replies (plans stream as written) uncounted, and a run's ``max_tokens`` and
    ``max_cost`` would never be reached. Like planexec's own ``openai:`` specs, a pinned one
    whose ``stream_usage`` is not set gets a copy with it on; the user's instance is never
    changed, and an explicit ``stream_usage=False`` is kept. A server that sends no counts
    still answers (its calls count zero tokens).
    """
    if "langchain_openai" not in sys.modules:  # then no model here is one of its family
        return model
    from langchain_openai.chat_models.base import BaseChatOpenAI

    if isinstance(model, BaseChatOpenAI) and model.stream_usage is None:
        return model.model_copy(update={"stream_usage": True})
    return model


def limits_of(context: Context, role: Role) -> Limits:
    """Return a role's model call limits in a run (``context.<role>_timeouts``, complete)."""
    given = getattr(context, f"{role}_timeouts")
    return Limits(**{**DEFAULT_TIMEOUTS, **given})


def load_chat_model(spec: str, limits: Limits | None = None, role: str = "model") -> BaseChatModel:
    """Return the chat model named by ``spec``, as planexec uses it: scrubbed of secrets.

    What callbacks, traces and streams see of its calls (prompts, replies, tool-call
    arguments, errors) holds ``[redacted]`` where a secret was. Its calls keep ``limits``
    (default: :class:`planexec.llm.calls.Limits`'s); ``role`` names it in errors.
    """
    limits = limits or Limits()
    return ScrubbedChatModel.around(provider_model(spec, limits), limits, role)


def provider_model(spec: str, limits: Limits | None = None) -> BaseChatModel:
    """Return the provider's model named by ``spec`` (``provider:model``, openai by default).

    Its client gets ``limits``' connect and idle (read) timeouts where it takes them
    (OpenAI-compatible clients). Raise :class:`ConfigurationError` in one line for a missing
    OpenAI key, an unknown provider, or a provider whose package is not installed.
    """
    provider, sep, name = spec.strip().partition(":")
    if not sep:
        provider, name = "openai", provider
    provider = provider or "openai"
    if not name.strip():
        raise ConfigurationError(f"model spec {spec!r} names no model: use provider:model")
    if provider == "scripted":
        from planexec.llm.scripted import ScriptedChatModel

        return ScriptedChatModel.from_file(scripted_path(name))
    if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
        raise ConfigurationError(MISSING_KEY)
    base_url = os.environ.get("OPENAI_BASE_URL") if provider == "openai" else None
    if base_url:
        _check_base_url(base_url)
    limits = limits or Limits()
    return _initialised(provider, name, base_url, limits.connect, limits.idle)


def _check_base_url(url: str) -> None:
    """Refuse an ``OPENAI_BASE_URL`` no client can call, in one line naming it.

    Without a scheme (``localhost:8000/v1``) or with a port out of range, every call would
    fail with the client's bare "Connection error." (or a crash inside its connection code).
    """
    if _callable_url(url):
        return
    shown = shown_url(url)
    raise ConfigurationError(
        f"OPENAI_BASE_URL {shown!r} is not a server's URL: give http:// or https://, a host "
        "and a port from 1 to 65535, and the API's path (e.g. http://localhost:11434/v1)"
    )


def _callable_url(url: str) -> bool:
    """Whether ``url`` is ``http(s)://host[:port]…`` with a port from 1 to 65535."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port out of range, a malformed IPv6 host
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0


# Providers whose clients retry by themselves: planexec.llm.calls is the one retry layer of
# provider errors (it honours Retry-After within the call's deadline), so their clients make
# one request per try.
CLIENT_RETRIES = frozenset({"openai", "azure_openai", "anthropic", "groq", "deepseek", "xai"})


# Providers whose clients take an openai.Timeout (connect, read): planexec's own deadlines
# (planexec.llm.calls) hold for every provider; these also stop a silent connection early.
CLIENT_TIMEOUTS = frozenset({"openai", "azure_openai", "deepseek", "xai"})


@lru_cache(maxsize=32)
def _initialised(
    provider: str, name: str, base_url: str | None, connect: float, idle: float
) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    options: dict[str, Any] = {"max_retries": 0} if provider in CLIENT_RETRIES else {}
    if provider == "openai":  # token counts of streamed replies (plans stream as written)
        options["stream_usage"] = True
    if provider in CLIENT_TIMEOUTS:
        with contextlib.suppress(ImportError):  # without the package, init_chat_model says so
            import openai

            options["timeout"] = openai.Timeout(idle, connect=connect)
    if base_url:
        options["base_url"] = base_url
    try:
        model: BaseChatModel = init_chat_model(name, model_provider=provider, **options)
        return model
    except ImportError as exc:
        raise ConfigurationError(f"model {provider}:{name}: {_first_line(exc)}") from None
    except ValueError as exc:
        raise ConfigurationError(
            f"unknown model provider {provider!r} in {provider}:{name} "
            f"({_first_line(exc)} ...): use provider:model with an installed LangChain "
            "integration, or scripted:PATH"
        ) from None
    except Exception as exc:  # a provider's own check (e.g. its key), made when it is built
        raise ConfigurationError(f"model {provider}:{name}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


SCRIPTED_DIR_ENV = "PLANEXEC_SCRIPTED_DIR"
MAX_SCRIPT_BYTES = 10 * 1024 * 1024


def scripted_path(name: str) -> str:
    """Return the path of a recorded-reply file a run names, if the operator allows it.

    A run's context can come from any client of the server, so ``scripted:PATH`` may only
    name a regular file of at most 10 MB inside the folder the operator sets in
    ``$PLANEXEC_SCRIPTED_DIR``; without it scripted models are off. Nothing else is read.
    """
    allowed = os.environ.get(SCRIPTED_DIR_ENV)
    if not allowed:
        raise ConfigurationError(
            f"scripted models are off: the operator enables them by setting {SCRIPTED_DIR_ENV} "
            "to the folder that holds recorded replies"
        )
    root = Path(allowed).resolve()
    path = Path(name).resolve()
    if not path.is_relative_to(root):
        raise ConfigurationError(
            f"scripted model file {name!r} is outside {SCRIPTED_DIR_ENV} ({root})"
        )
    if not path.is_file() or path.stat().st_size > MAX_SCRIPT_BYTES:
        raise ConfigurationError(
            f"scripted model file {name!r} is not a regular file of at most "
            f"{MAX_SCRIPT_BYTES // 2**20} MB"
        )
    return str(path)
