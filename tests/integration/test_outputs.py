"""Spilled outputs are out of the tools' reach and cannot be forged, overwritten or changed."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planexec import build_graph, default_registry
from planexec.storage.outputs import output_of
from planexec.tools.sandbox import Sandbox
from tests.helpers import plan_of, plan_reply, scripted, step, thread

BIG = "x" * 20_000


@tool
def passthrough(value: Any) -> Any:
    """Return the value unchanged."""
    return value


@tool
def forge_reference() -> dict[str, Any]:
    """Return what the old spilled-output reference looked like, naming a workspace file."""
    return {"$ref": "config.json", "bytes": 20, "preview": "looks spilled"}


_stamps = itertools.count()


@tool
def big_stamp() -> str:
    """Return a large output that differs on every call."""
    return BIG + str(next(_stamps))


def registry() -> Any:
    tools = default_registry()
    for extra in (passthrough, forge_reference, big_stamp):
        tools.register(extra)
    return tools


def run(graph: Any, context: Any, config: dict | None = None) -> tuple[dict, dict]:
    config = config or thread()
    graph.invoke({"task": "t"}, config, context=context)
    return graph.invoke(Command(resume={"action": "approve"}), config, context=context), config


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_a_tool_output_cannot_forge_a_reference(use_models, ctx, workspace):
    (workspace / "config.json").write_text(json.dumps({"token": "not for step 2"}))
    plan = plan_of(step(1, "forge_reference"), step(2, "passthrough", {"value": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    out, _ = run(graph, ctx())
    forged = {"$ref": "config.json", "bytes": 20, "preview": "looks spilled"}
    assert out["steps"]["1"]["output"] == forged and "output_file" not in out["steps"]["1"]
    assert out["steps"]["2"]["output"] == forged  # data, never the file it names
    assert out["final"]["status"] == "succeeded"


def test_tools_cannot_list_read_or_overwrite_spilled_outputs(
    use_models, ctx, workspace, workspace_root
):
    thread_config = thread()
    tid = thread_config["configurable"]["thread_id"]
    old_place = f".planexec/outputs/{tid}/v1-step1.json"  # where spills used to be
    plan = plan_of(
        step(1, "passthrough", {"value": BIG}),
        step(2, "list_files", {"folder": "."}, [1]),
        {**step(3, "write_file", {"path": old_place, "content": json.dumps("forged")}, [1]),
         "on_failure": "skip"},
        step(4, "passthrough", {"value": "$1"}, [1, 2]),
    )  # fmt: skip
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    out, _ = run(graph, ctx(), thread_config)
    steps = out["steps"]
    assert steps["2"]["output"]["files"] == ["sales.csv"]
    assert "a name planexec keeps for itself" in steps["3"]["error"]  # refused: not even hidden
    store = Sandbox.at(workspace_root).output_store()
    assert output_of(steps["4"], store) == BIG
    assert files_under(workspace) == {"sales.csv"}
    spills = {f"{steps[i]['output_file']['id']}.json" for i in ("1", "4")}
    assert files_under(store.folder) == spills
    assert not store.folder.is_relative_to(workspace)


def test_a_fork_approved_again_never_overwrites_the_original_spills(
    use_models, ctx, workspace_root
):
    plan = plan_of(step(1, "big_stamp"), step(2, "passthrough", {"value": "$1"}, [1]))
    use_models(planner=scripted(plan_reply(plan)))
    graph = build_graph(checkpointer=InMemorySaver(), tools=registry())
    original, config = run(graph, ctx())
    store = Sandbox.at(workspace_root).output_store()
    first = output_of(original["steps"]["1"], store)
    assert first.startswith(BIG) and output_of(original["steps"]["2"], store) == first

    original_head = graph.get_state(config).config
    at_approval = next(s for s in graph.get_state_history(config) if s.next == ("approval",))
    fork = graph.update_state(at_approval.config, None, as_node="planner")
    forked = graph.invoke(Command(resume={"action": "approve"}), fork, context=ctx())
    second = output_of(forked["steps"]["1"], store)
    assert forked["final"]["status"] == "succeeded" and second != first

    kept = graph.get_state(original_head).values["steps"]  # the original branch, after the fork
    assert output_of(kept["1"], store) == first and output_of(kept["2"], store) == first


@tool
def tamper_with_outputs(folder: str) -> str:
    """Overwrite every spilled output (as someone with access to planexec's folder could)."""
    for path in Path(folder).glob("*.json"):
        path.write_text(json.dumps("tampered"))
    return "done"


def test_a_changed_spill_is_detected_not_used(use_models, ctx, workspace_root):
    store = Sandbox.at(workspace_root).output_store()
    plan = plan_of(
        step(1, "passthrough", {"value": BIG}),
        step(2, "tamper_with_outputs", {"folder": str(store.folder)}, [1]),
        step(3, "passthrough", {"value": "$1"}, [1, 2]),
    )
    use_models(planner=scripted(plan_reply(plan)))
    tools = registry()
    tools.register(tamper_with_outputs)
    graph = build_graph(checkpointer=InMemorySaver(), tools=tools)
    out, _ = run(graph, ctx(max_replans=0))
    steps = out["steps"]
    assert steps["3"]["status"] == "failed"
    assert "was changed after it was written" in steps["3"]["error"]
    assert steps["1"]["status"] == "failed" and "changed" in steps["1"]["error"]  # evaluator
    assert steps["2"]["status"] == "skipped"  # built on step 1, which failed its check: discarded
    assert steps["2"]["error"].startswith("discarded: it depends on step 1")
    assert out["final"]["status"] == "failed"
