"""Issue 27: typed step outputs, through the public API.

A tool declares what it returns (its return annotation, or ``output_schema=`` at
registration). A reference to a field its output cannot have is refused before approval (the
planner repairs it; a reviewer's edit carrying it is refused), and so is a reference whose
type cannot fill its argument. An output of the wrong shape fails its own step: no dependent
runs on it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NotRequired

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

from planexec import build_graph, default_registry
from planexec.plan import PlanValidationError, validate_plan
from planexec.tools import ToolRegistry
from tests.helpers import DEMO, plan_of, plan_reply, sales_plan, scripted, step, thread

CALLED: list[str] = []


class Table(TypedDict):
    """A table's path, rows and columns."""

    path: str
    rows: int
    columns: list[str]
    unit: NotRequired[str]


class Item(BaseModel):
    """One item of a summary."""

    name: str
    score: float


class Summary(BaseModel):
    """A titled list of items."""

    title: str
    items: list[Item]


@dataclasses.dataclass
class Point:
    """A point."""

    x: int
    y: int


@tool
def load_table(name: str) -> Table:
    """Load a table by name."""
    CALLED.append("load_table")
    return {"path": f"{name}.csv", "rows": 3, "columns": ["date", "revenue"]}


@tool
def count_rows(rows: int) -> int:
    """Return the rows it was given."""
    CALLED.append("count_rows")
    return rows


@tool
def shout(text: str) -> str:
    """Return the text in capitals."""
    CALLED.append("shout")
    return text.upper()


@tool
def bad_table(name: str) -> Table:
    """Claim a table, return something else."""
    CALLED.append("bad_table")
    return {"path": name, "rows": "many", "columns": []}  # type: ignore[typeddict-item]


@tool
def summarise(title: str) -> Summary:
    """Summarise under a title."""
    return Summary(title=title, items=[Item(name="a", score=1.5)])


@tool
def origin() -> Point:
    """Return the origin."""
    return Point(0, 0)


@tool
def untyped(text: str):  # type: ignore[no-untyped-def]
    """Return anything (no annotation)."""
    return {"anything": text}


def raw_stats(value: str) -> Any:
    """Return stats (declared at registration)."""
    return {"mean": 1.0, "label": value}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    for item in (load_table, count_rows, shout, bad_table, summarise, origin, untyped):
        tools.register(item, side_effects=False)  # declared harmless
    tools.register(
        raw_stats,
        side_effects=False,
        output_schema={
            "type": "object",
            "properties": {"mean": {"type": "number"}, "label": {"type": "string"}},
            "required": ["mean", "label"],
        },
    )
    return tools


TOOLS = registry()


def problems(plan: dict[str, Any], tools: ToolRegistry = TOOLS) -> list[str]:
    try:
        validate_plan(plan, tools, max_steps=20)
    except PlanValidationError as exc:
        return exc.errors
    return []


def test_tools_declare_outputs_from_annotations_or_at_registration():
    assert TOOLS.output_schema("load_table")["required"] == ["path", "rows", "columns"]
    assert TOOLS.output_schema("count_rows") == {"type": "integer"}
    assert TOOLS.output_schema("summarise")["properties"]["items"]["type"] == "array"
    assert set(TOOLS.output_schema("origin")["properties"]) == {"x", "y"}
    assert TOOLS.output_schema("raw_stats")["required"] == ["mean", "label"]
    assert TOOLS.output_schema("untyped") is None  # keeps today's behaviour


def test_every_built_in_tool_declares_its_output():
    tools = default_registry()
    assert [n for n in tools.names() if tools.output_schema(n) is None] == []


def test_the_planner_listing_shows_each_output_compactly():
    listed = {e["name"]: e for e in json.loads(TOOLS.describe())}
    assert listed["load_table"]["returns"] == (
        "{path: string, rows: integer, columns: [string], unit?: string}"
    )
    assert (
        listed["summarise"]["returns"] == "{title: string, items: [{name: string, score: number}]}"
    )
    assert "returns" not in listed["untyped"]


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("$1.rowz", "$1.rowz does not exist: no field 'rowz' (fields: path, rows, columns, unit)"),
        ("$1.columns.first", "'first' is not an item of its list"),
        ("$1.path.0", "cannot take '0' of a string at .path"),
        ("$1.columns.0.name", "cannot take 'name' of a string at .columns.0"),
    ],
)
def test_a_reference_the_output_cannot_have_is_refused_naming_what_exists(reference, message):
    found = problems(
        plan_of(step(1, "load_table", {"name": "s"}), step(2, "shout", {"text": reference}))
    )
    assert len(found) == 1 and message in found[0], found
    assert found[0].startswith("step 2: ") and "step 1's tool load_table" in found[0]


@pytest.mark.parametrize(
    "reference",
    ["$1.path", "$1.columns.0", "$1.columns.7", "$1.unit", "see $1.rows rows", "all: ${1}"],
)
def test_references_the_output_can_have_are_accepted(reference):
    plan = plan_of(step(1, "load_table", {"name": "s"}), step(2, "shout", {"text": reference}))
    assert problems(plan) == []


def test_a_whole_output_of_another_type_cannot_fill_an_argument():
    plan = plan_of(step(1, "load_table", {"name": "s"}), step(2, "shout", {"text": "$1"}))
    assert problems(plan) == ["step 2: argument 'text' of shout takes string, but $1 is object"]


def test_a_reference_whose_type_cannot_fill_its_argument_is_refused():
    found = problems(
        plan_of(step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.path"}))
    )
    assert found == ["step 2: argument 'rows' of count_rows takes integer, but $1.path is string"]
    found = problems(
        plan_of(step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "n=$1.rows"}))
    )
    assert found and "takes integer, but 'n=$1.rows' is string" in found[0]
    ok = plan_of(step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.rows"}))
    assert problems(ok) == []


def test_models_dataclasses_explicit_schemas_and_undeclared_tools():
    assert (
        problems(
            plan_of(
                step(1, "summarise", {"title": "t"}), step(2, "shout", {"text": "$1.items.0.name"})
            )
        )
        == []
    )
    assert (
        "no field 'nam'"
        in problems(
            plan_of(
                step(1, "summarise", {"title": "t"}), step(2, "shout", {"text": "$1.items.0.nam"})
            )
        )[0]
    )
    assert problems(plan_of(step(1, "origin"), step(2, "count_rows", {"rows": "$1.x"}))) == []
    assert (
        "no field 'z'"
        in problems(plan_of(step(1, "origin"), step(2, "count_rows", {"rows": "$1.z"})))[0]
    )
    assert (
        "no field 'median'"
        in problems(
            plan_of(step(1, "raw_stats", {"value": "v"}), step(2, "shout", {"text": "$1.median"}))
        )[0]
    )
    # an undeclared tool's output, and the executor model's, may have anything
    assert (
        problems(plan_of(step(1, "untyped", {"text": "a"}), step(2, "shout", {"text": "$1.x.y"})))
        == []
    )
    model_step = {**step(1, None), "description": "write something"}
    assert problems(plan_of(model_step, step(2, "shout", {"text": "$1.x.y"}))) == []


def test_the_planner_repairs_a_wrong_reference_before_approval(use_models, ctx):
    wrong = plan_of(
        step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.rowz"})
    )
    right = plan_of(
        step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.rows"})
    )
    planner = scripted(plan_reply(wrong), plan_reply(right))
    use_models(planner=planner)
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    CALLED.clear()
    asked = graph.invoke({"task": "count"}, config, context=ctx(max_plan_repairs=1))
    request = asked["__interrupt__"][0].value
    assert request["plan"]["steps"][1]["args"] == {"rows": "$1.rows"}
    assert request["problems"] == []
    assert "no field 'rowz' (fields: path, rows, columns, unit)" in planner.prompts[-1]
    assert (
        '"returns": "{path: string, rows: integer, columns: [string], unit?: string}"'
        in (planner.prompts[0])
    )
    assert CALLED == []  # nothing ran before the approval
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    assert out["steps"]["2"]["output"] == 3


def test_an_edit_carrying_a_wrong_reference_is_refused_and_nothing_is_lost(use_models, ctx):
    right = plan_of(
        step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.rows"})
    )
    use_models(planner=scripted(plan_reply(right)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    asked = graph.invoke({"task": "count"}, config, context=ctx())["__interrupt__"][0].value
    assert asked["produces"] == {
        "1": "{path: string, rows: integer, columns: [string], unit?: string}",
        "2": "integer",
    }
    assert "produces" in asked["description"] and "rows: integer" in asked["description"]
    edited = plan_of(
        step(1, "load_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.colums.0"})
    )
    out = graph.invoke(Command(resume={"action": "edit", "plan": edited}), config, context=ctx())
    again = out["__interrupt__"][0].value
    assert (
        "$1.colums.0 does not exist: no field 'colums' (fields: path, rows, columns, unit)"
        in (again["error"])
    )
    assert again["plan"] == asked["plan"]
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_wrong_shaped_output_fails_its_own_step_and_no_dependent_runs_on_it(
    use_models, ctx, mode
):
    import asyncio

    plan = plan_of(
        {**step(1, "bad_table", {"name": "s"}), "on_failure": {"retry": 1}},
        step(2, "count_rows", {"rows": "$1.rows"}),
        step(3, "shout", {"text": "independent"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config, context = thread(), ctx(max_replans=0, retry_initial_interval=0.0)
    CALLED.clear()

    async def go() -> dict[str, Any]:
        await graph.ainvoke({"task": "t"}, config, context=context)
        return await graph.ainvoke(Command(resume={"action": "approve"}), config, context=context)

    if mode == "sync":
        graph.invoke({"task": "t"}, config, context=context)
        out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    else:
        out = asyncio.run(go())
    first = out["steps"]["1"]
    assert first["status"] == "failed" and first["attempts"] == 2  # on_failure retry applies
    assert first["error"] == (
        "bad_table returned an output that does not match its declared output schema: "
        "at rows: expected integer; got a string (4 characters)"
    )
    assert "output" not in first or first.get("output") is None
    assert out["steps"]["2"]["status"] == "skipped"
    assert out["steps"]["3"]["status"] == "succeeded"
    assert "count_rows" not in CALLED


def test_a_failed_shape_is_replanned_like_any_failure(use_models, ctx):
    plan = plan_of(step(1, "bad_table", {"name": "s"}), step(2, "count_rows", {"rows": "$1.rows"}))
    around = plan_of(
        step(3, "load_table", {"name": "s"}), step(4, "count_rows", {"rows": "$3.rows"})
    )
    planner = use_models(planner=scripted(plan_reply(plan), plan_reply(around)))["planner"]
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config, context = thread(), ctx(max_replans=1)
    graph.invoke({"task": "t"}, config, context=context)
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=context)
    assert out["final"]["status"] == "succeeded", out["final"]
    assert "at rows: expected integer; got a string (4 characters)" in planner.prompts[1]
    assert out["steps"]["4"]["output"] == 3


def test_a_correct_typed_plan_runs_unchanged(use_models, ctx):
    plan = plan_of(
        step(1, "load_table", {"name": "sales"}),
        step(2, "shout", {"text": "$1.columns.1"}),
        step(3, "count_rows", {"rows": "$1.rows"}),
        step(4, "summarise", {"title": "$2"}),
        step(5, "raw_stats", {"value": "$4.items.0.name"}),
    )
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=TOOLS)
    config = thread()
    graph.invoke({"task": "t"}, config, context=ctx())
    out = graph.invoke(Command(resume={"action": "approve"}), config, context=ctx())
    assert out["final"]["status"] == "succeeded"
    outputs = {k: v["output"] for k, v in out["steps"].items()}
    assert outputs["2"] == "REVENUE" and outputs["3"] == 3
    assert outputs["4"] == {"title": "REVENUE", "items": [{"name": "a", "score": 1.5}]}
    assert outputs["5"] == {"mean": 1.0, "label": "a"}


def test_plans_written_before_typed_outputs_still_load():
    """The shipped demo plan, compact and written out in full, validates as before."""
    tools = default_registry()
    compact = json.loads((DEMO / "sales_plan.json").read_text())
    full = sales_plan()
    for plan in (compact, full):
        assert len(plan["steps"]) == 6
        assert len(validate_plan(plan, tools, max_steps=50).steps) == 6


def cli_run(tmp_path, plan: dict[str, Any], answer: str) -> str:
    from typer.testing import CliRunner

    from planexec.cli import app

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "sales.csv").write_text((DEMO / "sales.csv").read_text())
    args = ["run", "--plan", str(plan_file), "--workspace", "ws", "--db", str(tmp_path / "r.db")]
    result = CliRunner().invoke(app, args, input=answer)
    return " ".join(result.output.split())


def test_the_cli_shows_what_each_step_produces_and_refuses_a_wrong_reference(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    right = plan_of(
        step(1, "load_csv", {"path": "sales.csv"}),
        step(2, "write_file", {"path": "rows.txt", "content": "rows: $1.rows"}),
    )
    shown = cli_run(tmp_path, right, "y\n")
    assert "step 1 produces {rows: integer, columns: {<key>: string}," in shown
    assert "step 2 produces {path: string, bytes: integer}" in shown
    assert (tmp_path / "ws" / "rows.txt").read_text() == "rows: 3060"

    wrong = plan_of(
        step(1, "load_csv", {"path": "sales.csv"}),
        step(2, "write_file", {"path": "rows.txt", "content": "rows: $1.row_count"}),
    )
    shown = cli_run(tmp_path, wrong, "c\n")
    assert "$1.row_count does not exist: no field 'row_count' (fields: rows, columns," in shown
