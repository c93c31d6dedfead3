"""Issue 27, attacked: output schemas that are huge, looping, remote, hostile or unusual.

Found by a hostile review of typed step outputs: each case once hung, fetched, leaked, or
refused (or failed) what it should not have.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pytest
from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from planexec.plan import PlanValidationError, validate_plan
from planexec.plan.shapes import compact, reach
from planexec.tools import ToolRegistry
from planexec.tools.returns import ToolOutputError, check_output


@tool
def src(x: str) -> Any:
    """Return anything."""
    return x


@tool
def use(s: str) -> str:
    """Use text."""
    return s


@tool
def use_int(n: int) -> int:
    """Use a number."""
    return n


def registry(schema: Any) -> ToolRegistry:
    tools = ToolRegistry([use, use_int])
    tools.register(src, output_schema=schema)
    return tools


def refused(schema: Any, reference: str, tool_name: str = "use") -> list[str]:
    arg = "s" if tool_name == "use" else "n"
    plan = {
        "goal": "g",
        "steps": [
            {"id": 1, "tool": "src", "args": {"x": "a"}},
            {"id": 2, "tool": tool_name, "args": {arg: reference}},
        ],
    }
    try:
        validate_plan(plan, registry(schema), max_steps=10)
    except PlanValidationError as exc:
        return exc.errors
    return []


def test_a_schema_whose_references_multiply_costs_bounded_time():
    loop = {"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}}}
    chain = {
        "$defs": {
            f"D{i}": {"anyOf": [{"$ref": f"#/$defs/D{i + 1}"}, {"$ref": f"#/$defs/D{i + 1}"}]}
            for i in range(40)
        }
        | {"D40": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "$ref": "#/$defs/D0",
    }
    for schema in ({**loop, "$ref": "#/$defs/A"}, chain):
        started = time.monotonic()
        tools = registry(schema)
        tools.describe()
        refused(schema, "$1.a.b.c")
        assert time.monotonic() - started < 2


def test_a_remote_or_dangling_ref_is_refused_at_registration_never_fetched():
    for schema in (
        {"$ref": "http://127.0.0.1:9/schema.json"},
        {"$ref": "#/$defs/Nope"},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
    ):
        with pytest.raises(ValueError, match="cannot be checked"):
            registry(schema)


def test_a_schema_that_is_not_json_schema_or_a_pattern_that_could_backtrack_is_refused():
    with pytest.raises(ValueError, match="cannot be checked"):
        registry({"type": "objectx"})
    with pytest.raises(ValueError, match="cannot be checked"):
        registry({"type": "string", "pattern": "(?=a)b"})  # lookaround: not linear time


def test_an_evil_pattern_costs_linear_time_in_checks_and_plans():
    evil = "^(a+)+$"
    tools = registry({"type": "object", "patternProperties": {evil: {"type": "string"}}})
    started = time.monotonic()
    assert refused(tools.output_schema("src"), "$1." + "a" * 40 + "_") == []
    string = registry({"type": "string", "pattern": evil})
    with pytest.raises(ToolOutputError, match="pattern"):
        check_output(string.get("src"), "a" * 40 + "!")
    assert time.monotonic() - started < 1


def test_a_failed_check_never_quotes_the_value(monkeypatch):
    secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    tools = registry({"type": "object", "properties": {"n": {"type": "integer"}}})
    with pytest.raises(ToolOutputError) as caught:
        check_output(tools.get("src"), {"n": "x" * 270 + secret})
    assert "ABCDEF" not in str(caught.value)
    assert str(caught.value).endswith("at n: expected integer; got a string (314 characters)")
    with pytest.raises(ToolOutputError, match='required field "n" is missing'):
        check_output(
            registry({"type": "object", "required": ["n"]}).get("src"), {"m": "tok\\en-123"}
        )


class Aliased(BaseModel):
    """A model with an alias and a duration."""

    file_name: str = Field(alias="fileName")
    took: dt.timedelta
    at: dt.datetime


@tool
def aliased(x: str) -> Aliased:
    """Return a model."""
    return Aliased(fileName=x, took=dt.timedelta(seconds=3), at=dt.datetime(2026, 1, 1))


def test_a_schema_describes_what_is_stored_fields_by_name_durations_as_seconds():
    tools = ToolRegistry([aliased, use])
    shape = compact(tools.output_schema("aliased"))
    assert shape == "{file_name: string, took: number, at: string}"
    from planexec.storage.storable import to_storable

    stored = to_storable(aliased.invoke({"x": "a.csv"}))
    check_output(tools.get("aliased"), stored)  # no error: what is stored fits


@pytest.mark.parametrize(
    ("schema", "reference"),
    [
        (
            {
                "$defs": {"B": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "$ref": "#/$defs/B",
                "properties": {"extra": {"type": "string"}},
            },
            "$1.extra",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "oneOf": [{"properties": {"k": {"const": 1}}}, {"properties": {"k": {"const": 2}}}],
            },
            "$1.a",
        ),
        (
            {"type": "object", "if": {"required": ["a"]}, "then": {"properties": {"b": {}}}},
            "$1.b",
        ),
        ({"type": "object", "dependentSchemas": {"a": {"properties": {"c": {}}}}}, "$1.c"),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, "$1.z"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "$1.0"),
    ],
)
def test_a_field_some_valid_output_has_is_never_refused(schema, reference):
    assert refused(schema, reference) == []


def test_refusals_say_why_once():
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "items": False}
    assert refused(schema, "$1.1") == [
        "step 2: $1.1 does not exist: no item 1 (its list is shorter) in what step 1's tool "
        "src returns"
    ]
    number = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert len(refused(number, "$1.a$1.a", "use_int")) == 1
    assert len(refused(number, "$1.b $1.b")) == 1


def test_odd_pointers_and_data_that_looks_like_a_schema_are_taken_as_they_are():
    schema = {"type": "array", "prefixItems": [{}], "items": {"$ref": "#/prefixItems/²"}}
    assert reach(schema, ("3", "x")).anything  # a pointer it cannot follow: anything
    with pytest.raises(ValueError, match="cannot be checked"):
        registry(schema)
    constant = registry({"const": {"type": "number"}})
    check_output(constant.get("src"), {"type": "number"})  # the constant is data, not a schema


def test_a_huge_schema_is_listed_in_a_bounded_line():
    many = {f"field_{i}": {"type": "string"} for i in range(3000)}
    tools = registry({"type": "object", "properties": many})
    line = json.loads(tools.describe())[0]
    listed = {e["name"]: e for e in json.loads(tools.describe())}
    assert len(listed["src"]["returns"]) <= 600 and line
    assert reach(tools.output_schema("src"), ("field_2999",))


class Plain(TypedDict):
    """A typed dict."""

    a: int


def test_checking_a_big_output_costs_less_than_storing_it():
    tools = ToolRegistry()
    tools.register(src, output_schema=list[Plain])
    rows = [{"a": i} for i in range(100_000)]
    started = time.perf_counter()
    check_output(tools.get("src"), rows)
    assert time.perf_counter() - started < 1.0


def test_a_remote_meta_schema_is_never_fetched_and_older_drafts_are_read_as_theirs():
    with pytest.raises(ValueError, match="cannot be checked"):
        registry({"$schema": "http://127.0.0.1:9/meta.json", "type": "object"})
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}, {"type": "integer"}],
    }
    tools = registry(draft7)
    check_output(tools.get("src"), ["a", 1])
    with pytest.raises(ToolOutputError, match="at 1: expected integer"):
        check_output(tools.get("src"), ["a", "b"])


def test_a_property_named_like_a_keyword_is_still_a_number_that_may_be_null():
    tools = registry({"type": "object", "properties": {"default": {"type": "number"}}})
    check_output(tools.get("src"), {"default": None})  # NaN, as stored


def test_no_failure_message_quotes_a_key_or_a_value():
    secret = "sk-supersecret-123456"
    closed = registry({"type": "object", "additionalProperties": False})
    with pytest.raises(ToolOutputError) as caught:
        check_output(closed.get("src"), {secret: 1})
    assert secret not in str(caught.value)
    tools = ToolRegistry()
    tools.register(use_json_args)
    plan = {"goal": "g", "steps": [{"id": 1, "tool": "use_json_args", "args": {"n": secret}}]}
    with pytest.raises(PlanValidationError) as refused_plan:
        validate_plan(plan, tools, max_steps=5)
    assert secret not in str(refused_plan.value)
    assert "at n: expected integer; got a string (21 characters)" in str(refused_plan.value)


def _json_args(**_: Any) -> str:
    return "ok"


use_json_args = StructuredTool(
    name="use_json_args",
    description="Take arguments described by a JSON Schema, as an MCP tool does.",
    args_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}, "a": {"type": "string"}, "b": {}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        "minProperties": 1,
        "dependentRequired": {"b": ["a"]},
    },
    func=_json_args,
)


def test_json_schema_arguments_given_by_reference_are_checked_one_by_one():
    tools = ToolRegistry([use])
    tools.register(use_json_args)
    plan = {
        "goal": "g",
        "steps": [
            {"id": 1, "tool": "use", "args": {"s": "x"}},
            {"id": 2, "tool": "use_json_args", "args": {"a": "$1", "b": "x"}},
        ],
    }
    validate_plan(plan, tools, max_steps=5)  # anyOf, minProperties, dependentRequired: later
