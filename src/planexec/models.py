"""Chat models by name: ``openai:MODEL`` (any OpenAI-compatible endpoint) or ``scripted:PATH``.

Nodes call ``models.load_chat_model(...)``, which returns every model scrubbed of secrets
(:class:`planexec.scrubbed.ScrubbedChatModel`); tests patch ``provider_model``, the one place
that makes the provider's model.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from planexec.errors import ConfigurationError
from planexec.scrubbed import ScrubbedChatModel
from planexec.state import RoleUsage

MISSING_KEY = (
    "OPENAI_API_KEY is not set: export it, or point OPENAI_BASE_URL at an OpenAI-compatible "
    "server (Ollama, vLLM, llama.cpp) and set OPENAI_API_KEY to any value"
)


def load_chat_model(spec: str) -> BaseChatModel:
    """Return the chat model named by ``spec``, as planexec uses it: scrubbed of secrets.

    What callbacks, traces and streams see of its calls (prompts, replies, tool-call
    arguments, errors) holds ``[redacted]`` where a secret was.
    """
    return ScrubbedChatModel.around(provider_model(spec))


def provider_model(spec: str) -> BaseChatModel:
    """Return the provider's model named by ``spec`` (``provider:model``, openai by default)."""
    provider, sep, name = spec.partition(":")
    if not sep:
        provider, name = "openai", spec
    if provider == "scripted":
        from planexec.scripted import ScriptedChatModel

        return ScriptedChatModel.from_file(scripted_path(name))
    if provider == "openai":
        if not os.environ.get("OPENAI_API_KEY"):
            raise ConfigurationError(MISSING_KEY)
        return _openai_model(name, os.environ.get("OPENAI_BASE_URL"))
    raise ConfigurationError(
        f"unknown model provider {provider!r} in {spec!r}: use openai:MODEL or scripted:PATH"
    )


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


@lru_cache(maxsize=16)
def _openai_model(name: str, base_url: str | None) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    # planexec's RetryPolicy is the one retry layer (errors.is_transient): the client makes one
    # request per call, so a call costs at most MODEL_RETRY.max_attempts requests, not 3 × 3.
    return ChatOpenAI(model=name, base_url=base_url, max_retries=0)


MAX_TOKENS_PER_CALL = 2**40
"""Token counts a reply claims beyond this are not believed (they would overflow the sums)."""


def _tokens(value: object) -> int:
    """Return a reply's token count as a plain int: 0 unless a sane non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return int(value) if 0 <= value <= MAX_TOKENS_PER_CALL else 0


def usage_of(role: str, message: BaseMessage) -> dict[str, RoleUsage]:
    """Count one model call and its tokens, for the state's ``usage`` reducer.

    The counts come from the endpoint: anything but a sane non-negative integer counts as 0.
    """
    meta = getattr(message, "usage_metadata", None)
    if not isinstance(meta, dict):
        meta = {}
    return {
        role: RoleUsage(
            calls=1,
            input_tokens=_tokens(meta.get("input_tokens")),
            output_tokens=_tokens(meta.get("output_tokens")),
        )
    }
