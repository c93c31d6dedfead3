"""Bad configuration is refused at run start with one message naming the field (section 5)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import Context, build_graph
from planexec.context import DEFAULT_TIMEOUTS, InvalidContextError, run_context
from planexec.errors import ConfigurationError, PlanexecError
from planexec.execution.retries import MAX_RETRY_INTERVAL, retry_delay
from planexec.tools import ToolRegistry
from tests.helpers import echo, plan_of, plan_reply, scripted, step, thread

GOOD = plan_of(step(1, "echo", {"text": "hi"}))

BAD = [
    ("max_steps", "30", "max_steps: Input should be a valid integer"),
    ("max_steps", 0, "max_steps: Input should be greater than or equal to 1"),
    ("max_steps", True, "max_steps: Input should be a valid integer"),
    ("shared_folder", 5, "shared_folder: Input should be a valid string"),
    ("step_timeout", None, "step_timeout: Input should be a valid number"),
    ("step_timeout", 0, "step_timeout: Input should be greater than 0"),
    ("step_timeout", math.inf, "step_timeout: Input should be a finite number"),
    ("max_parallel_steps", "four", "max_parallel_steps: Input should be a valid integer"),
    ("approval", "sometimes", "approval: Input should be 'always', 'first' or 'never'"),
    ("llm_judge", "yes", "llm_judge: Input should be a valid boolean"),
    ("max_replans", 1000, "max_replans: Input should be less than or equal to 30"),
    ("retry_backoff_factor", 0.5, "retry_backoff_factor: Input should be greater than or equal"),
    ("planner_model", "", "planner_model: String should have at least 1 character"),
    ("executor_model", "openai:a\x00b", "executor_model: contains a NUL character"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_a_bad_context_value_is_refused_naming_the_field(field, value, message, ctx):
    with pytest.raises(InvalidContextError) as direct:
        ctx(**{field: value})
    assert message in str(direct.value)
    assert "\n" not in str(direct.value)
    assert isinstance(direct.value, ValueError | ConfigurationError)

    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    config = thread()
    as_dict = {**dataclasses.asdict(ctx()), field: value}  # what the LangGraph server passes
    with pytest.raises(InvalidContextError, match=field):
        graph.invoke({"task": "t"}, config, context=as_dict)
    assert not graph.get_state(config).values  # refused before anything was stored


def test_every_bad_field_is_named_in_one_message(ctx):
    with pytest.raises(InvalidContextError) as caught:
        ctx(max_steps="30", shared_folder=5, step_timeout=None)
    text = str(caught.value)
    assert text.startswith("invalid context: ")
    assert "max_steps" in text and "shared_folder" in text and "step_timeout" in text


def test_an_unknown_context_key_is_refused_before_anything_is_stored(ctx):
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    config = thread()
    with pytest.raises(
        InvalidContextError, match=r"max_step: unknown field \(did you mean max_steps\?\)"
    ):
        graph.invoke({"task": "t"}, config, context={"max_step": 3})
    assert not graph.get_state(config).values


def test_a_context_spoiled_after_construction_is_refused_and_the_thread_stays_usable(
    use_models, ctx
):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    config = thread()
    good = ctx()
    graph.invoke({"task": "t"}, config, context=good)
    spoiled = ctx()
    spoiled.max_parallel_steps = "four"  # type: ignore[assignment]
    with pytest.raises(InvalidContextError, match="max_parallel_steps"):
        graph.invoke(Command(resume={"action": "approve"}), config, context=spoiled)
    assert graph.get_state(config).next == ("approval",)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=good)
    assert out["final"]["status"] == "succeeded"


def test_a_context_that_is_not_a_context_is_refused(use_models):
    use_models(planner=scripted(plan_reply(GOOD)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    with pytest.raises(InvalidContextError, match="not a str"):
        graph.invoke({"task": "t"}, thread(), context="max_steps=3")


def test_numbers_of_the_right_kind_are_accepted(ctx):
    context = ctx(step_timeout=5, retry_initial_interval=0, max_replans=30, inline_output_limit=0)
    assert context.step_timeout == 5


def test_planexec_errors_are_value_errors_so_the_server_shows_their_message():
    assert issubclass(PlanexecError, ValueError)
    assert issubclass(ConfigurationError, ValueError)


def test_retry_delays_are_capped_and_never_overflow(ctx):
    huge = ctx(retry_initial_interval=1e300, retry_backoff_factor=1e300, step_max_attempts=100)
    assert retry_delay(huge, 1) == MAX_RETRY_INTERVAL
    assert retry_delay(huge, 99) == MAX_RETRY_INTERVAL
    normal = ctx(retry_initial_interval=0.5, retry_backoff_factor=2.0)
    assert [retry_delay(normal, a) for a in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_the_defaults_studio_shows_sent_back_unchanged_keep_the_operators_defaults(
    use_models, monkeypatch
):
    """Studio's form starts at the context schema's defaults, the built-in ones. Sent back as
    they are, they are valid and the operator's environment defaults still apply: the run gets
    the settings of ``Context()``."""
    for role in ("planner", "executor", "evaluator"):
        monkeypatch.setenv(f"PLANEXEC_{role.upper()}_MODEL", f"test:{role}")
    monkeypatch.setenv("PLANEXEC_MODEL_IDLE_TIMEOUT", "7")
    graph = build_graph(checkpointer=InMemorySaver(), tools=ToolRegistry([echo]))
    schema = graph.get_context_jsonschema()
    assert schema is not None
    form = {name: field["default"] for name, field in schema["properties"].items()}
    assert form["planner_model"] == "openai:gpt-4.1"
    assert form["planner_timeouts"]["idle"] == DEFAULT_TIMEOUTS["idle"] != 7
    settings = run_context(form)
    assert settings == Context()
    assert settings.planner_model == "test:planner" and settings.planner_timeouts["idle"] == 7
    use_models(planner=scripted(plan_reply(GOOD)))  # only test:planner has a model
    out = graph.invoke({"task": "t"}, thread(), context=form)
    assert out["__interrupt__"][0].value["plan"]["steps"][0]["tool"] == "echo"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-replans", "1000"], "max_replans: Input should be less than or equal to 30"),
        (["--approval", "sometimes"], "approval: Input should be 'always', 'first' or 'never'"),
    ],
)
def test_the_cli_refuses_a_bad_setting_in_one_line(args, message, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from planexec.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "t", "--yes", "--db", str(tmp_path / "r.db"), *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: invalid context: ") and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
