"""Model specs go through init_chat_model: any installed provider, one-line errors otherwise."""

from __future__ import annotations

import importlib.util

import pytest
from langchain_openai import ChatOpenAI

from planexec.errors import ConfigurationError
from planexec.llm import models


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


def test_build_graph_runs_with_model_instances_and_no_spec_or_key(monkeypatch, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from planexec import Context, build_graph
    from planexec.tools import ToolRegistry
    from tests.helpers import echo, plan_of, plan_reply, scripted, step, text_reply, thread

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the context's openai specs are unused
    plan = plan_of(step(1, "echo", {"text": "hi"}), step(2, None, {"said": "$1"}, [1]))
    planner, executor = scripted(plan_reply(plan)), scripted(text_reply("the executor's answer"))
    graph = build_graph(
        checkpointer=InMemorySaver(),
        tools=ToolRegistry([echo]),
        workspace_root=tmp_path,
        models={"planner": planner, "executor": executor},
    )
    config, context = thread(), Context()
    graph.invoke({"task": "t"}, config, context=context)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert out["steps"]["2"]["output"] == "the executor's answer"
    assert out["usage"]["planner"]["calls"] == 1 and out["usage"]["executor"]["calls"] == 1


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"judge": None}, "unknown model role"),
        ({"planner": "openai:gpt-4.1"}, "LangChain chat model"),
    ],
)
def test_build_graph_refuses_models_it_cannot_use(given, message):
    from planexec import build_graph

    with pytest.raises(ConfigurationError, match=message):
        build_graph(models=given)


def test_odd_specs_are_one_line_configuration_errors(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:  # an empty provider is openai's
        models.provider_model(":gpt-4o")
    assert str(info.value) == models.MISSING_KEY
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert models.provider_model(":gpt-4o").max_retries == 0  # client retries off there too
    with pytest.raises(ConfigurationError, match="names no model"):
        models.provider_model("openai:")
    script = tmp_path / "bad.json"
    script.write_text('[{"content": ["sk-secret-in-file"]}]')
    monkeypatch.setenv("PLANEXEC_SCRIPTED_DIR", str(tmp_path))
    with pytest.raises(ConfigurationError) as bad:
        models.provider_model(f"scripted:{script}")
    assert "\n" not in str(bad.value) and "sk-secret-in-file" not in str(bad.value)
