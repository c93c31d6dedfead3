"""What Studio shows of the context: real defaults, bounds, and model fields marked as models."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

from planexec import Context, build_graph

MODELS = {
    "planner_model": "openai:gpt-4.1",
    "executor_model": "openai:gpt-4.1-mini",
    "evaluator_model": "openai:gpt-4.1-mini",
}


def test_every_field_shows_its_default_in_the_schema(monkeypatch):
    for name in MODELS:
        monkeypatch.delenv(f"PLANEXEC_{name.upper()}", raising=False)
    schema = build_graph().get_context_jsonschema()
    assert schema is not None
    for f in dataclasses.fields(Context):
        assert "default" in schema["properties"][f.name], f.name
    for name, default in MODELS.items():
        assert schema["properties"][name]["default"] == default
        assert getattr(Context(), name) == default
    assert schema["properties"]["max_parallel_steps"]["minimum"] == 1


def test_model_fields_are_marked_as_models_the_way_langgraph_templates_do():
    hints = get_type_hints(Context, include_extras=True)
    marked = {
        name
        for name, hint in hints.items()
        if {"__template_metadata__": {"kind": "llm"}} in getattr(hint, "__metadata__", ())
    }
    assert marked == set(MODELS)


def test_the_environment_still_chooses_the_default_model(monkeypatch):
    monkeypatch.setenv("PLANEXEC_PLANNER_MODEL", "scripted:plan.json")
    assert Context().planner_model == "scripted:plan.json"
    assert Context(planner_model="openai:o3").planner_model == "openai:o3"  # asked for: kept
