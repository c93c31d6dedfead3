"""Which steps may run before approval, under which key, and which results a plan takes.

:mod:`planexec.execution.speculation` on its own: the operator's mode, the steps that may run
early (read-only tools that reach nothing outside the workspace; an undeclared or unknown tool
counts as side-effecting and reaching outside), the key a step runs under (its content and its
inputs), what :func:`adopt` takes, what :func:`discard` removes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from planexec.errors import ConfigurationError
from planexec.execution.speculation import (
    adopt,
    discard,
    effective_mode,
    may_run_early,
    operator_mode,
    speculation_keys,
    stricter,
)
from planexec.plan.doc import step_digest
from planexec.storage.outputs import OutputStore
from planexec.tools import ToolRegistry


@tool
def look(x: str) -> str:
    """Look at x (read-only)."""
    return x


@tool
def send(x: str) -> str:
    """Send x (side effects)."""
    return x


@tool
def undeclared(x: str) -> str:
    """Do something with x (declares nothing)."""
    return x


@tool
def fetch(x: str) -> str:
    """Fetch x from elsewhere (read-only, reaching outside)."""
    return x


look.metadata = {"side_effects": False, "open_world": False}
fetch.metadata = {"side_effects": False}
send.metadata = {"side_effects": True, "open_world": False}
TOOLS = ToolRegistry([look, fetch, send, undeclared])


def doc_step(
    sid: int, tool_name: str | None, args: dict[str, Any] | None = None, deps: list[int] = ()
) -> dict[str, Any]:
    return {
        "id": sid,
        "tool": tool_name,
        "tools": [],
        "args": args or {},
        "description": f"step {sid}",
        "depends_on": list(deps),
        "expected_output": "",
    }


def plan(*steps: dict[str, Any]) -> Any:
    return {"goal": "g", "version": 1, "steps": list(steps)}


def ran(p: Any, keys: dict[int, str], sid: int, status: str = "succeeded") -> dict[str, Any]:
    """A speculated entry for step ``sid`` of ``p`` as the speculator writes it."""
    step = next(s for s in p["steps"] if s["id"] == sid)
    record = {"step_digest": step_digest(step, p["goal"]), "status": status, "output": sid}
    return {"key": keys[sid], "where": HERE, "version": 1, "record": record}


HERE = "here"
"""The ``where`` of every speculated entry in these tests (one workspace, one model)."""


# the operator's mode
@pytest.mark.parametrize(
    ("given", "mode"),
    [(None, "off"), (True, "tools"), (False, "off"), ("models", "models"), (" ON ", "tools")],
)
def test_the_operator_mode_is_read_from_the_argument(given, mode, monkeypatch):
    monkeypatch.delenv("PLANEXEC_SPECULATE", raising=False)
    assert operator_mode(given) == mode


def test_the_operator_mode_falls_back_to_the_environment_and_refuses_a_bad_value(monkeypatch):
    monkeypatch.setenv("PLANEXEC_SPECULATE", "models")
    assert operator_mode(None) == "models"
    assert operator_mode("off") == "off"  # the argument wins
    monkeypatch.setenv("PLANEXEC_SPECULATE", "always")
    with pytest.raises(ConfigurationError, match="PLANEXEC_SPECULATE"):
        operator_mode(None)


def test_a_run_only_makes_it_stricter():
    assert effective_mode("models", True) == "models"
    assert effective_mode("models", False) == "off"
    assert effective_mode("off", True) == "off"
    assert stricter("tools", "models") == "tools" and stricter("off", "tools") == "off"


# which steps may run early
@pytest.mark.parametrize(
    ("step", "mode", "early"),
    [
        (doc_step(1, "look"), "tools", True),
        (doc_step(1, "look"), "off", False),
        (doc_step(1, "send"), "models", False),
        (doc_step(1, "undeclared"), "models", False),
        (doc_step(1, "fetch"), "models", False),
        (doc_step(1, "no_such_tool"), "models", False),
        ({**doc_step(1, None), "tools": ["look"]}, "tools", False),
        ({**doc_step(1, None), "tools": ["look"]}, "models", True),
        ({**doc_step(1, None), "tools": ["look", "send"]}, "models", False),
        ({**doc_step(1, None), "tools": ["undeclared"]}, "models", False),
        ({**doc_step(1, None), "tools": ["look", "fetch"]}, "models", False),
        ({**doc_step(1, None), "tools": ["no_such_tool"]}, "models", False),
    ],
)
def test_only_read_only_steps_may_run_early(step, mode, early):
    assert may_run_early(step, TOOLS, mode) is early


def test_a_step_after_a_side_effect_gets_no_key():
    p = plan(
        doc_step(1, "look"),
        doc_step(2, "send", {"x": "$1"}, [1]),
        doc_step(3, "look", {"x": "$2"}, [2]),
        doc_step(4, "look", {"x": "$1"}, [1]),
    )
    assert sorted(speculation_keys(p, {}, TOOLS, "tools")) == [1, 4]
    assert speculation_keys(p, {}, TOOLS, "off") == {}


def test_a_key_changes_with_the_step_and_with_its_inputs_only():
    p = plan(doc_step(1, "look", {"x": "a"}), doc_step(2, "look", {"x": "$1"}, [1]))
    p["steps"].append(doc_step(3, "look", {"x": "b"}))
    keys = speculation_keys(p, {}, TOOLS, "tools")
    edited = copy.deepcopy(p)
    edited["steps"][0]["args"] = {"x": "z"}
    again = speculation_keys(edited, {}, TOOLS, "tools")
    assert again[1] != keys[1]
    assert again[2] != keys[2]  # its $1 input changed, not its own text
    assert again[3] == keys[3]


def test_a_key_names_the_finished_record_of_an_earlier_round():
    p = plan(doc_step(1, "send"), doc_step(2, "look", {"x": "$1"}, [1]))
    done = {"step_digest": step_digest(p["steps"][0], "g"), "status": "succeeded", "output": "a"}
    keys = speculation_keys(p, {"1": done}, TOOLS, "tools")
    other = speculation_keys(p, {"1": {**done, "output": "b"}}, TOOLS, "tools")
    assert list(keys) == [2] and keys[2] != other[2]


# what a plan takes
def test_an_unchanged_plan_takes_its_results_marked_speculative():
    p = plan(doc_step(1, "look", {"x": "a"}), doc_step(2, "look", {"x": "$1"}, [1]))
    keys = speculation_keys(p, {}, TOOLS, "tools")
    records, adopted = adopt(p, {}, {"1": ran(p, keys, 1), "2": ran(p, keys, 2)}, HERE)
    assert adopted == [1, 2]
    assert records["1"]["speculative"] is True and records["2"]["output"] == 2


def test_an_edited_step_and_its_dependents_take_nothing():
    p = plan(
        doc_step(1, "look", {"x": "a"}),
        doc_step(2, "look", {"x": "$1"}, [1]),
        doc_step(3, "look", {"x": "b"}),
    )
    keys = speculation_keys(p, {}, TOOLS, "tools")
    speculated = {str(i): ran(p, keys, i) for i in (1, 2, 3)}
    edited = copy.deepcopy(p)
    edited["steps"][0]["args"] = {"x": "z"}
    records, adopted = adopt(edited, {}, speculated, HERE)
    assert adopted == [3]
    assert records["1"]["status"] == records["2"]["status"] == "pending"


def test_a_swapped_tool_takes_nothing():
    p = plan(doc_step(1, "look", {"x": "a"}))
    keys = speculation_keys(p, {}, TOOLS, "tools")
    swapped = plan(doc_step(1, "send", {"x": "a"}))
    assert adopt(swapped, {}, {"1": ran(p, keys, 1)}, HERE)[1] == []


def test_a_failed_early_step_is_not_taken_and_neither_are_its_dependents():
    p = plan(doc_step(1, "look", {"x": "a"}), doc_step(2, "look", {"x": "$1"}, [1]))
    keys = speculation_keys(p, {}, TOOLS, "tools")
    _, adopted = adopt(p, {}, {"1": ran(p, keys, 1, "failed"), "2": ran(p, keys, 2)}, HERE)
    assert adopted == []


def test_a_forged_key_is_not_taken():
    p = plan(doc_step(1, "look", {"x": "a"}))
    forged = {**ran(p, {1: "0" * 64}, 1)}
    assert adopt(p, {}, {"1": forged}, HERE)[1] == []


# what a reject or a cancel removes
def test_discard_removes_the_spilled_files_of_every_result(tmp_path: Path):
    store = OutputStore(tmp_path / "outputs")
    ref = store.save("x" * 100, preview="xxx")
    assert (tmp_path / "outputs" / f"{ref['id']}.json").exists()
    entry = {"key": "k", "version": 1, "record": {"status": "succeeded", "output_file": ref}}
    assert discard({"2": entry}, store) == {"speculated": None}
    assert not (tmp_path / "outputs" / f"{ref['id']}.json").exists()
    assert discard({}, store) == {} and discard(None, store) == {}


def test_a_result_made_elsewhere_is_not_taken():
    """Another workspace or executor model (``where``) is another input: the step runs again."""
    p = plan(doc_step(1, "look", {"x": "a"}))
    keys = speculation_keys(p, {}, TOOLS, "tools")
    assert adopt(p, {}, {"1": ran(p, keys, 1)}, HERE)[1] == [1]
    assert adopt(p, {}, {"1": ran(p, keys, 1)}, "another workspace")[1] == []
