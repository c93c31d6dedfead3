"""The CLI on a builder's path: own Python tools, --plan without a model, hints, honest ticks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planexec.cli import app
from tests.helpers import DEMO, plan_of, step
from tests.mcp_servers.running import stdio_entry
from tests.openai_server import Behaviour, serve

runner = CliRunner()

TOOLS_MODULE = '''
from collections.abc import Callable, Iterator

from langchain_core.tools import BaseTool, tool
from planexec.tools import ToolRegistry


def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


@tool
def delete_customer(customer: str) -> str:
    """Delete a customer."""
    return f"DELETED {customer}"


TOOLS = [shout, delete_customer]
REGISTRY = ToolRegistry()
REGISTRY.register(shout, side_effects=False)


def make_tools() -> list[Callable[..., str]]:
    """The tools, made when asked (the return annotation says it returns tools)."""
    return TOOLS


def tools_one_by_one() -> Iterator[BaseTool]:
    """The tools, yielded one by one."""
    yield tool(shout)
    yield delete_customer


NOT_TOOLS = 42


def read_file(path: str) -> str:
    """Read a file my way."""
    return path


CLASH = [read_file]
'''


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANEXEC_DB", str(tmp_path / "runs.sqlite"))
    (tmp_path / "mytools.py").write_text(TOOLS_MODULE)
    return tmp_path


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def thread_of(output: str) -> str:
    return re.search(r"thread ([0-9a-f-]{36})", output).group(1)


def plan_file(path: Path, *steps: dict) -> str:
    path.write_text(json.dumps(plan_of(*steps)))
    return str(path)


@pytest.mark.parametrize(
    "source",
    ["mytools:TOOLS", "mytools:make_tools", "mytools.py:TOOLS", "mytools:tools_one_by_one"],
)
def test_tools_of_a_module_run_and_their_marks_show_at_approval(env, source):
    plan = plan_file(
        env / "plan.json",
        step(1, "shout", {"text": "hi"}),
        step(2, "delete_customer", {"customer": "c-42"}),
    )
    result = invoke("run", "--plan", plan, "--tools", source, "--workspace", "ws", "--yes")
    assert result.exit_code == 0, result.output
    marks = result.output.split("tools that write or send: ")[1].splitlines()[0]
    assert "delete_customer (side effects not declared)" in marks  # fail safe: undeclared
    assert "shout (side effects not declared)" in marks
    assert "DELETED c-42" in result.output and "HI" in result.output


def test_a_registry_keeps_its_marks_and_the_built_in_tools_stay(env):
    (env / "notes.txt").write_text("x")
    plan = plan_file(
        env / "plan.json",
        step(1, "shout", {"text": "hi"}),
        step(2, "write_file", {"path": "a.txt", "content": "$1"}, [1]),
    )
    result = invoke("run", "--plan", plan, "--tools", "mytools:REGISTRY", "--workspace", "ws",
                    "--yes")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (env / "ws" / "a.txt").read_text() == "HI"
    assert "tools that write or send: write_file\n" in result.output  # shout declares none


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("nosuchmodule:TOOLS", "--tools nosuchmodule:TOOLS: no module named 'nosuchmodule'"),
        ("mytools:NOPE", "--tools mytools:NOPE: module mytools has no attribute 'NOPE'"),
        (
            "mytools:NOT_TOOLS",
            "--tools mytools:NOT_TOOLS is a value of type int: ATTR must be a "
            "ToolRegistry, a list of tools",
        ),
        ("mytools", "--tools mytools: give MODULE:ATTR"),
        ("missing.py:TOOLS", "--tools missing.py:TOOLS: no file missing.py"),
        ("mytools:shout", "is a function with arguments (shout; to add it as a tool, list it)"),
        ("mytools:CLASH", "--tools mytools:CLASH: its tool 'read_file' (mytools.read_file"),
    ],
)
def test_tools_errors_are_one_line(env, source, message):
    plan = plan_file(env / "plan.json", step(1, "list_files", {}))
    result = invoke("run", "--plan", plan, "--tools", source, "--workspace", "ws", "--yes")
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


HOSTILE_MODULE = '''
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.tools import tool
from planexec.tools import ToolRegistry

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


def wipe_cache() -> str:
    """Delete every cached report (a tool for the planner)."""
    Path("WIPED").write_text("the tool ran while loading")
    return "wiped"


def unannotated():
    """Looks like a factory, but says nothing of what it returns."""
    Path("WIPED").write_text("called")
    return []


def unresolvable() -> list[Undefined]:
    """Its annotation names a type defined nowhere."""
    Path("WIPED").write_text("called")
    return []


def typed_for_checkers() -> list[BaseTool]:
    """Its annotation names a type imported only for type checkers."""

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return [echo]


def make_registry() -> ToolRegistry:
    """A registry, made when asked (a string annotation: __future__ annotations)."""

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return ToolRegistry([echo])


def failing_factory() -> ToolRegistry | list[BaseTool]:
    """A factory whose own code fails."""
    raise RuntimeError("factory broke: " + os.environ["PLANEXEC_TEST_API_KEY"])


def exiting_factory() -> ToolRegistry:
    """A factory that exits the process."""
    sys.exit(3)


class Boom:
    def __iter__(self):
        raise RuntimeError("iter boom " + os.environ["PLANEXEC_TEST_API_KEY"])


class Prop:
    @property
    def tools(self):
        raise SystemExit(5)


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


BOOM = Boom()
P = Prop()
INF = iter(int, 1)
LONG_TEXT = "secret-ish text " * 20
OBJECT = BadRepr()
'''

IMPORT_EXITS = "import sys\nsys.exit(3)\n"
IMPORT_FAILS = "import os\nraise ValueError('bad module ' + os.environ['PLANEXEC_TEST_API_KEY'])\n"
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def hostile(env, monkeypatch):
    (env / "hostile.py").write_text(HOSTILE_MODULE)
    (env / "exits_on_import.py").write_text(IMPORT_EXITS)
    (env / "fails_on_import.py").write_text(IMPORT_FAILS)
    monkeypatch.setenv("PLANEXEC_TEST_API_KEY", SECRET)
    monkeypatch.setenv("PLANEXEC_TEST_CANARY", "canary-value-in-the-environment")
    return env


def run_with_tools(env: Path, source: str):
    plan = plan_file(env / "plan.json", step(1, "list_files", {}))
    return invoke("run", "--plan", plan, "--tools", source, "--workspace", "ws", "--yes")


def assert_one_line_error(result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert SECRET not in result.output
    assert "canary-value" not in result.output


@pytest.mark.parametrize("attr", ["wipe_cache", "unannotated"])
def test_a_plain_function_named_by_tools_is_never_called(hostile, attr):
    result = run_with_tools(hostile, f"hostile:{attr}")
    assert not (hostile / "WIPED").exists()  # loading the tools ran none of the user's code
    assert_one_line_error(
        result,
        f"--tools hostile:{attr} is a function: to add it as a tool put it in a list "
        f"(TOOLS = [{attr}]); a function that returns tools must say so in its return annotation "
        "(-> list[BaseTool] or -> ToolRegistry)",
    )


def test_a_factory_whose_annotation_cannot_be_resolved_is_not_called(hostile):
    result = run_with_tools(hostile, "hostile:unresolvable")
    assert not (hostile / "WIPED").exists()
    assert_one_line_error(result, "--tools hostile:unresolvable is a function")
    assert "cannot be resolved" in result.output and "NameError" in result.output


@pytest.mark.parametrize("attr", ["make_registry", "typed_for_checkers"])
def test_a_factory_with_a_string_annotation_of_tools_is_called(hostile, attr):
    plan = plan_file(hostile / "plan.json", step(1, "echo", {"text": "made by the factory"}))
    result = invoke("run", "--plan", plan, "--tools", f"hostile:{attr}", "--workspace", "ws",
                    "--yes")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "made by the factory" in result.output


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("hostile:BOOM", "--tools hostile:BOOM: reading BOOM failed: RuntimeError: iter boom"),
        ("hostile:P.tools", "--tools hostile:P.tools: reading P.tools failed: SystemExit: 5"),
        (
            "hostile:failing_factory",
            "--tools hostile:failing_factory: calling failing_factory() failed: RuntimeError: "
            "factory broke: [redacted]",
        ),
        (
            "hostile:exiting_factory",
            "--tools hostile:exiting_factory: calling exiting_factory() failed: SystemExit: 3",
        ),
        ("hostile:INF", "--tools hostile:INF: tools holds more than 10000 items"),
        (
            "exits_on_import:X",
            "--tools exits_on_import:X: importing exits_on_import failed: SystemExit: 3",
        ),  # fmt: skip
        (
            "fails_on_import:X",
            "--tools fails_on_import:X: importing fails_on_import failed: "
            "ValueError: bad module [redacted]",
        ),  # fmt: skip
        ("os:environ", "--tools os:environ is a mapping of type _Environ ("),
        ("hostile:LONG_TEXT", "--tools hostile:LONG_TEXT is a str of 320 characters"),
        ("hostile:OBJECT", "--tools hostile:OBJECT is an object of type BadRepr"),
        ("builtins:print", "--tools builtins:print is the builtin function print"),
    ],
)
def test_what_the_users_code_raises_or_holds_is_one_scrubbed_line(hostile, source, message):
    result = run_with_tools(hostile, source)
    assert_one_line_error(result, message)
    assert "secret-ish" not in result.output


NOT_FACTORIES_MODULE = '''
import typing
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

from langchain_core.tools import BaseTool, StructuredTool, tool
from planexec.tools import ToolRegistry


def _ran(name):
    Path("RAN").write_text(name + " ran while the tools were loaded")


def bare_list() -> list:
    """Delete old files; return the deleted names."""
    _ran("bare_list")
    return []


def bare_iterator() -> Iterator:
    """Send every pending message (a generator: its body must not run either)."""
    _ran("bare_iterator")
    yield "sent"


def bare_tuple_text() -> "tuple":
    _ran("bare_tuple_text")
    return ()


def bare_sequence() -> Sequence:
    _ran("bare_sequence")
    return []


def bare_set() -> set:
    _ran("bare_set")
    return set()


def optional_bare_list() -> Optional[list]:
    _ran("optional_bare_list")
    return []


def list_of_any() -> list[Any]:
    _ran("list_of_any")
    return []


def list_of_bare_callable() -> list[Callable]:
    _ran("list_of_bare_callable")
    return []


def list_of_bare_typing_callable() -> list[typing.Callable]:
    _ran("list_of_bare_typing_callable")
    return []


def list_of_objects() -> list[object]:
    _ran("list_of_objects")
    return []


def list_of_tools_or_any() -> list[BaseTool | Any]:
    _ran("list_of_tools_or_any")
    return []


def typing_list() -> typing.List:
    _ran("typing_list")
    return []


def iterable_text() -> "Iterable":
    _ran("iterable_text")
    return []


def list_of_text() -> list[str]:
    _ran("list_of_text")
    return []


def annotation_runs_code() -> "_ran('the annotation') or list[BaseTool]":
    return []


def nested_annotation_runs_code() -> "list['_ran(__name__) or BaseTool']":
    return []


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def optional_tools() -> Optional[list[BaseTool]]:
    return [echo]


def registry_or_none() -> ToolRegistry | None:
    return ToolRegistry([echo])


def subclass_items() -> list[StructuredTool]:
    return [echo]


def union_items() -> "list[BaseTool | Callable[..., str]]":
    return [echo]


def callables_of_any() -> Sequence[Callable[..., Any]]:
    return [echo]


def generated() -> Generator[BaseTool, None, None]:
    yield echo
'''


@pytest.fixture
def not_factories(env):
    (env / "notfactories.py").write_text(NOT_FACTORIES_MODULE)
    return env


@pytest.mark.parametrize(
    "attr",
    [
        "bare_list",
        "bare_iterator",
        "bare_tuple_text",
        "bare_sequence",
        "bare_set",
        "optional_bare_list",
        "list_of_any",
        "list_of_bare_callable",
        "list_of_bare_typing_callable",
        "list_of_objects",
        "list_of_tools_or_any",
        "typing_list",
        "iterable_text",
        "list_of_text",
    ],
)
def test_a_function_whose_annotation_names_no_tools_is_never_called(not_factories, attr):
    result = run_with_tools(not_factories, f"notfactories:{attr}")
    assert not (not_factories / "RAN").exists()  # neither called nor its generator body run
    assert_one_line_error(
        result,
        f"--tools notfactories:{attr} is a function: to add it as a tool put it in a list "
        f"(TOOLS = [{attr}]); a function that returns tools must say so in its return annotation "
        "(-> list[BaseTool] or -> ToolRegistry)",
    )


@pytest.mark.parametrize("attr", ["annotation_runs_code", "nested_annotation_runs_code"])
def test_an_annotation_that_would_run_code_is_never_evaluated(not_factories, attr):
    result = run_with_tools(not_factories, f"notfactories:{attr}")
    assert not (not_factories / "RAN").exists()
    assert_one_line_error(result, f"--tools notfactories:{attr} is a function")
    assert "-> list[BaseTool] or -> ToolRegistry" in result.output


@pytest.mark.parametrize(
    "attr",
    [
        "optional_tools",
        "registry_or_none",
        "subclass_items",
        "union_items",
        "callables_of_any",
        "generated",
    ],
)
def test_a_factory_annotated_with_tools_is_called(not_factories, attr):
    plan = plan_file(not_factories / "plan.json", step(1, "echo", {"text": "made by " + attr}))
    result = invoke("run", "--plan", plan, "--tools", f"notfactories:{attr}", "--workspace",
                    "ws", "--yes")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"made by {attr}" in result.output


LEAKY_MODULE = '''
from langchain_core.tools import tool


@tool
def ok(text: str) -> str:
    """Return the text."""
    return text


SHORT_SECRET = "hunter2-db-pw"
NUMBER = 987654321123
TEXT_ITEM = [ok, "hunter2-db-pw"]
NUMBER_ITEM = [ok, 987654321123]
BYTES_ITEM = [ok, b"hunter2-db-pw"]
MAPPING_ITEM = [ok, {"password": "hunter2-db-pw"}]
'''


@pytest.mark.parametrize(
    ("attr", "shown"),
    [
        ("SHORT_SECRET", "--tools leaky:SHORT_SECRET is a str of 13 characters: ATTR must be"),
        ("NUMBER", "--tools leaky:NUMBER is a value of type int: ATTR must be"),
        ("TEXT_ITEM", "one item is a str of 13 characters"),
        ("NUMBER_ITEM", "one item is a value of type int"),
        ("BYTES_ITEM", "one item is 13 bytes (of type bytes)"),
        ("MAPPING_ITEM", "one item is a mapping of type dict (1 entries)"),
    ],
)
def test_an_error_never_shows_what_a_value_holds(env, attr, shown):
    (env / "leaky.py").write_text(LEAKY_MODULE)
    result = run_with_tools(env, f"leaky:{attr}")
    assert_one_line_error(result, shown)
    assert "hunter2" not in result.output and "987654321123" not in result.output


def test_tools_are_given_to_resume_as_well(env):
    plan = plan_file(env / "plan.json", step(1, "shout", {"text": "hi"}))
    first = invoke("run", "--plan", plan, "--tools", "mytools:TOOLS", "--workspace", "ws",
                   input="")  # fmt: skip
    assert first.exit_code == 1 and "resume" in first.output, first.output
    tid = thread_of(first.output)
    again = invoke("resume", tid, "--tools", "mytools:TOOLS", "--yes")
    assert again.exit_code == 0, again.output
    assert "HI" in again.output


def test_a_given_plan_with_no_model_fails_without_waiting_for_a_replanner(env):
    (env / "ws" / "folder").mkdir(parents=True)
    plan = plan_file(env / "plan.json", step(2, "read_file", {"path": "folder"}))
    result = invoke("run", "--plan", plan, "--workspace", "ws", "--yes")
    assert result.exit_code == 1, result.output
    assert "revising" not in result.output and "OPENAI_API_KEY is not set" not in result.output
    assert (
        "step 2 failed; no planner model is configured to revise the plan "
        "(set OPENAI_API_KEY or --planner-model)"
    ) in result.output
    tid = thread_of(result.output)
    shown = json.loads(invoke("show", tid, "--json").stdout)
    assert shown["next"] == [] and shown["final"]["status"] == "failed", shown
    again = invoke("resume", tid)
    assert "already finished" in again.output and again.exit_code == 1, again.output


@pytest.mark.parametrize("answer", ["--yes", "p\nc\n"])
def test_a_failed_step_that_asks_is_not_replanned_with_no_model(env, answer):
    (env / "ws" / "folder").mkdir(parents=True)
    failing = {**step(1, "read_file", {"path": "folder"}), "on_failure": "ask"}
    plan = plan_file(env / "plan.json", failing)
    given = ["--yes"] if answer == "--yes" else []
    result = invoke("run", "--plan", plan, "--workspace", "ws", *given,
                    input=None if given else "y\n" + answer)  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "revising the plan" not in result.output and "error:" not in result.output
    assert "p = replan" not in result.output
    assert "cancelled" in result.output


def test_a_step_reading_a_file_left_in_the_cwd_is_told_to_use_data(env):
    shutil.copy(DEMO / "sales.csv", env / "sales.csv")
    planner = env / "planner.json"
    plan = plan_of(step(1, "load_csv", {"path": "sales.csv"}))
    planner.write_text(json.dumps([{"tool_calls": [{"name": "Plan", "args": plan}]}]))
    result = invoke("run", "Analyse sales.csv", "--planner-model", f"scripted:{planner}",
                    "--workspace", "ws", "--yes", "--max-replans", "0")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "copy them in with --data sales.csv" in result.output, result.output


@pytest.fixture
def refusing_model(monkeypatch):
    """An OpenAI-compatible endpoint whose every call fails (401: not retried)."""
    error = {"message": "Incorrect API key provided", "type": "invalid_request_error",
             "code": "invalid_api_key"}  # fmt: skip
    failing = Behaviour(status=401, error=error)
    with serve(lambda body: {}, behave=lambda body, n: failing) as (url, requests):
        monkeypatch.setenv("OPENAI_API_KEY", "local-key-not-secret")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        yield requests


def test_no_tick_for_a_plan_whose_model_call_failed(env, refusing_model):
    result = invoke("run", "do things", "--workspace", "ws", "--yes")
    assert result.exit_code == 2 and "Incorrect API key" in result.output, result.output
    assert "✔ planned" not in result.output, result.output


def test_no_tick_for_a_planner_that_gave_no_valid_plan(env):
    planner = env / "planner.json"
    bad = plan_of(step(1, "no_such_tool", {}))
    planner.write_text(json.dumps([{"match": ".", "tool_calls": [{"name": "Plan", "args": bad}]}]))
    result = invoke("run", "do things", "--planner-model", f"scripted:{planner}",
                    "--workspace", "ws", "--yes")  # fmt: skip
    assert result.exit_code == 1 and "no valid plan" in result.output, result.output
    assert "✔ planned" not in result.output, result.output


def test_no_tick_for_a_revision_whose_model_call_failed(env, refusing_model):
    (env / "ws" / "folder").mkdir(parents=True)
    plan = plan_file(env / "plan.json", step(1, "read_file", {"path": "folder"}))
    result = invoke("run", "--plan", plan, "--workspace", "ws", "--yes")
    assert result.exit_code == 2 and "Incorrect API key" in result.output, result.output
    assert "replanner: revising the plan" in result.output
    assert "✔ revised" not in result.output, result.output


@pytest.fixture
def mcp_file(env):
    path = env / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"notes": stdio_entry("notes")}}))
    return str(path)


def test_a_resume_shows_the_plan_as_it_is_now_against_its_tools(env, mcp_file):
    plan = plan_file(env / "plan.json", step(1, "notes__read_note", {"title": "todo"}))
    first = invoke("run", "--plan", plan, "--mcp", mcp_file, "--workspace", "ws", input="")
    assert first.exit_code == 1, first.output
    tid = thread_of(first.output)

    without = invoke("resume", tid, "--yes")  # no --mcp: the plan's tool is unknown now
    assert "unknown tool" in without.output, without.output
    assert "approved" not in without.output, without.output
    assert without.exit_code != 0

    answered = invoke("resume", tid, input="y\n")  # approving an invalid plan is refused
    assert "refused:" in answered.output and answered.exit_code == 1, answered.output

    again = invoke("resume", tid, "--mcp", mcp_file, "--yes")
    assert again.exit_code == 0, again.output
    assert "unknown tool" not in again.output and "refused" not in again.output, again.output
    assert "write tests" in again.output


def test_tools_and_mcp_servers_together(env, mcp_file):
    plan = plan_file(
        env / "plan.json",
        step(1, "notes__read_note", {"title": "todo"}),
        step(2, "shout", {"text": "$1.text"}, [1]),
    )
    result = invoke("run", "--plan", plan, "--mcp", mcp_file, "--tools", "mytools:REGISTRY",
                    "--workspace", "ws", "--yes")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "WRITE TESTS" in result.output


def teardown_module():
    shutil.rmtree(Path("planexec-runs"), ignore_errors=True)
