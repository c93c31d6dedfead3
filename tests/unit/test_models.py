"""Model specs go through init_chat_model: any installed provider, one-line errors otherwise."""

from __future__ import annotations

import importlib.util

import pytest
from langchain_openai import ChatOpenAI

from planexec import models
from planexec.errors import ConfigurationError


def test_an_openai_spec_makes_a_client_that_does_not_retry_by_itself(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = models.provider_model("openai:gpt-4.1-mini")
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.max_retries) == ("gpt-4.1-mini", 0)
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert isinstance(models.provider_model("gpt-4.1-mini"), ChatOpenAI)  # openai by default


def test_a_missing_openai_key_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:
        models.provider_model("openai:gpt-4.1")
    assert str(info.value) == models.MISSING_KEY


def test_an_unknown_provider_is_one_line_naming_it():
    with pytest.raises(ConfigurationError, match="unknown model provider 'bogus'") as info:
        models.provider_model("bogus:model-1")
    assert "\n" not in str(info.value)


@pytest.mark.skipif(
    importlib.util.find_spec("langchain_ollama") is not None, reason="langchain-ollama installed"
)
def test_a_provider_whose_package_is_missing_says_what_to_install():
    with pytest.raises(ConfigurationError, match="pip install langchain-ollama") as info:
        models.provider_model("ollama:llama3.1")
    assert "\n" not in str(info.value)
