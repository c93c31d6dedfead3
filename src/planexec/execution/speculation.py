"""Speculation: which steps may run while their plan awaits approval, and which results count.

Opt-in twice: the operator allows it (``build_graph(speculate=...)``, else
``$PLANEXEC_SPECULATE``: ``off``, ``tools`` or ``models``) and the run asks for it
(``Context.speculate``); a run can only make it stricter. A step may run before approval
(:func:`speculation_keys`) only if:

- its tool is declared free of side effects (``side_effects=False``, an MCP ``readOnlyHint``:
  :meth:`~planexec.tools.registry.ToolRegistry.has_side_effects`; an undeclared or unknown tool
  counts as side-effecting), or, under ``models`` only, it is a ``"tool": null`` step whose
  listed tools are all so declared (its executor model then spends before the approval);
- and every step it depends on already succeeded in an earlier round, or may run too.

Each such step gets a **key**: the SHA-256 of its content (:func:`~planexec.plan.doc.step_digest`)
and, for each dependency, that dependency's key or its finished record. The speculator node
records a result under the key it ran with; the executor takes it for a step of the approved
plan only if the key computed there is the same (:func:`adopt`, the one place that does): a step
that was edited, or whose input (a ``$N`` reference, a dependency) changed, runs again.
A rejection or a cancel discards them all (:func:`discard`, the one place that does).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Literal, get_args

from planexec.errors import ConfigurationError
from planexec.execution.round import event_writer
from planexec.plan.doc import step_digest, topological_order
from planexec.plan.records import current_records, record_key
from planexec.state import OutputFile, PlanDoc, SpeculatedStep, StepDoc, StepRecord
from planexec.storage.outputs import OutputStore
from planexec.tools.registry import ToolRegistry

SpeculationMode = Literal["off", "tools", "models"]
"""``off``: nothing runs before approval; ``tools``: steps of read-only tools; ``models``: also
``"tool": null`` steps (their model is paid for before the approval) whose tools are read-only."""

MODES: tuple[str, ...] = get_args(SpeculationMode)
_ORDER = {"off": 0, "tools": 1, "models": 2}
_WORDS = {"on": "tools", "true": "tools", "1": "tools", "false": "off", "0": "off", "": "off"}


def operator_mode(value: bool | str | None) -> SpeculationMode:
    """Return the operator's speculation mode: ``value`` if given, else ``$PLANEXEC_SPECULATE``.

    ``True`` means ``tools``, ``False`` ``off``; unset everywhere: ``off``.
    """
    given: Any = value if value is not None else os.environ.get("PLANEXEC_SPECULATE", "off")
    if isinstance(given, bool):
        return "tools" if given else "off"
    word = str(given).strip().lower()
    word = _WORDS.get(word, word)
    if word not in MODES:
        raise ConfigurationError(
            f"speculate={given!r} (build_graph or PLANEXEC_SPECULATE) is not one of "
            f"{', '.join(MODES)} (or true/false)"
        )
    return word  # type: ignore[return-value]  # checked against MODES above


def effective_mode(operator: SpeculationMode, asked: bool) -> SpeculationMode:
    """Return what a run speculates: the operator's mode if the run asks for it, else nothing."""
    return operator if asked else "off"


def stricter(left: SpeculationMode, right: SpeculationMode) -> SpeculationMode:
    """Return the stricter of two modes (``off`` < ``tools`` < ``models``)."""
    return left if _ORDER[left] <= _ORDER[right] else right


def may_run_early(step: StepDoc, tools: ToolRegistry, mode: SpeculationMode) -> bool:
    """Say whether the step, on its own, may run before approval under ``mode``."""
    if mode == "off":
        return False
    if step["tool"] is not None:
        return _stays_inside(step["tool"], tools)
    if mode != "models":
        return False
    return all(_stays_inside(t, tools) for t in step["tools"])


def _stays_inside(name: str, tools: ToolRegistry) -> bool:
    """Say whether a tool may run before approval: read-only, and not reaching outside.

    A read-only tool that reaches outside (a web fetch) could send what a step gives it (a
    file the step before read) before anyone reviewed the plan: it waits for the approval.
    """
    return name in tools and not tools.has_side_effects(name) and not tools.is_open_world(name)


def speculation_keys(
    plan: PlanDoc, records: dict[str, StepRecord], tools: ToolRegistry, mode: SpeculationMode
) -> dict[int, str]:
    """Return the key of every pending step of ``plan`` that may run before approval.

    ``records`` are the thread's step records (those of an earlier round still count for
    steps that did not change: :func:`~planexec.plan.records.current_records`).
    """
    if mode == "off":
        return {}
    current = current_records(plan, records)
    keys: dict[int, str] = {}
    for step in topological_order(plan["steps"]):
        if current[record_key(step["id"])].get("status") != "pending":
            continue
        if not may_run_early(step, tools, mode):
            continue
        key = _key(step, plan["goal"], current, keys)
        if key is not None:
            keys[step["id"]] = key
    return keys


def _key(
    step: StepDoc, goal: str, current: dict[str, StepRecord], keys: dict[int, str]
) -> str | None:
    """Return the step's key, or None if one of its dependencies may not run before approval."""
    deps: list[list[Any]] = []
    for dep in sorted(step["depends_on"]):
        record = current[record_key(dep)]
        if record.get("status") == "succeeded":
            deps.append([dep, "record", _sha256(record)])
        elif dep in keys:
            deps.append([dep, "key", keys[dep]])
        else:
            return None
    return _sha256({"step": step_digest(step, goal), "deps": deps})


def _sha256(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def where_of(workspace_root: Path, executor_model: str) -> str:
    """Return what a speculative result ran against besides its plan (its "where").

    The run's workspace, what its files were (:func:`workspace_files`) and its executor model
    (a model step's): the executor takes a result only where it was made, from the same
    files. Touches the disk.
    """
    return _sha256(
        {
            "workspace": str(workspace_root),
            "files": workspace_files(workspace_root),
            "executor_model": executor_model,
        }
    )


MAX_FINGERPRINTED = 20_000
"""Entries of a workspace :func:`workspace_files` looks at; more: it never matches again."""


def workspace_files(root: Path) -> str:
    """Return a fingerprint of the files under ``root``: paths, sizes, times, links' targets.

    A result read from a file that changed since (the reviewer fixed an input, another run
    wrote to a shared folder) must not be taken: any change under the workspace changes it.
    Links are not followed into folders; a link's target is part of it. Past
    :data:`MAX_FINGERPRINTED` entries it is a fresh random value (so nothing is taken).
    """
    entries: list[list[Any]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(folder, name)
            try:
                link = os.readlink(path) if path.is_symlink() else None
                seen = path.stat()  # a link to a file: its target's size and time
                entries.append([str(path.relative_to(root)), link, seen.st_size, seen.st_mtime_ns])
            except OSError:  # gone, or a broken link
                entries.append([str(path.relative_to(root)), None, None, None])
            if len(entries) > MAX_FINGERPRINTED:
                return uuid.uuid4().hex
    return _sha256(entries)


def adopt(
    plan: PlanDoc,
    records: dict[str, StepRecord],
    speculated: dict[str, SpeculatedStep] | None,
    where: str,
) -> tuple[dict[str, StepRecord], list[int]]:
    """Return ``plan``'s records with the speculative results that are its own, and their ids.

    The one place a result made before approval becomes a result of the (approved) plan: a
    step takes it only if it is pending, its key in ``plan`` equals the key it ran under, it
    succeeded, ran where the approved plan runs (``where``: :func:`where_of`), and every step
    it depends on either had finished before or takes its own speculative result too. Every
    other speculative result is left out (and the caller discards them all).
    """
    if not speculated:
        return records, []
    current = current_records(plan, records)
    keys: dict[int, str] = {}
    adopted: list[int] = []
    for step in topological_order(plan["steps"]):
        sid = step["id"]
        found = speculated.get(record_key(sid))
        if found is None or current[record_key(sid)].get("status") != "pending":
            continue
        key = _key(step, plan["goal"], current, keys)
        record = found.get("record") or {}
        if (
            key is None
            or found.get("key") != key
            or found.get("where") != where
            or record.get("status") != "succeeded"
            or record.get("step_digest") != step_digest(step, plan["goal"])
            or any(
                current[record_key(d)].get("status") != "succeeded" and d not in adopted
                for d in step["depends_on"]
            )
        ):
            continue
        keys[sid] = key
        adopted.append(sid)
    merged = dict(current)
    for sid in adopted:
        merged[record_key(sid)] = {**speculated[record_key(sid)]["record"], "speculative": True}
    return merged, adopted


def spilled_files(
    speculated: dict[str, SpeculatedStep] | None, keep: list[int] | None = None
) -> list[OutputFile]:
    """Return the spilled output files of speculative results, except the ``keep`` steps'."""
    kept = {record_key(s) for s in keep or []}
    return [
        found["record"]["output_file"]
        for sid, found in (speculated or {}).items()
        if sid not in kept and "output_file" in (found.get("record") or {})
    ]


def discard(speculated: dict[str, SpeculatedStep] | None, outputs: OutputStore) -> dict[str, None]:
    """Return the state update that discards every speculative result (a reject, a cancel).

    Their spilled files are removed and a ``speculation_discarded`` event names their steps;
    nothing to discard: no update, no event.
    """
    if not speculated:
        return {}
    for ref in spilled_files(speculated):
        outputs.discard(ref)
    write = event_writer()
    if write is not None:
        write({"event": "speculation_discarded", "steps": sorted(int(s) for s in speculated)})
    return {"speculated": None}
