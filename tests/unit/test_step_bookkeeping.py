"""The per-step bookkeeping made cheaper stays what it was: plan order, digests, wake-ups."""

from __future__ import annotations

import asyncio
import random
import threading
from graphlib import CycleError, TopologicalSorter
from typing import Any

import pytest

from planexec.execution.outcomes import ran_digest
from planexec.execution.wakeups import wake_soon
from planexec.plan.doc import step_digest, topological_order


def _graphlib_order(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The order topological_order gave with graphlib (level by level, plan order)."""
    position = {s["id"]: i for i, s in enumerate(steps)}
    graph = {s["id"]: [d for d in s["depends_on"] if d in position] for s in steps}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    ordered = []
    while sorter.is_active():
        for sid in sorted(sorter.get_ready(), key=position.__getitem__):
            ordered.append(steps[position[sid]])
            sorter.done(sid)
    return ordered


def test_plan_order_is_graphlibs_level_by_level_order_with_cycles_refused_alike() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(0, 12)
        repeated = rng.random() < 0.3  # repeated ids, unknown and repeated dependencies too
        ids = [rng.randint(1, 15) for _ in range(n)] if repeated else rng.sample(range(1, 40), n)
        steps = [
            {"id": i, "depends_on": [rng.choice([*ids, 99]) for _ in range(rng.randint(0, 3))]}
            for i in ids
        ]
        try:
            expected = [id(s) for s in _graphlib_order(steps)]
        except CycleError:
            with pytest.raises(CycleError):
                topological_order(steps)  # type: ignore[arg-type]
            continue
        assert [id(s) for s in topological_order(steps)] == expected  # type: ignore[arg-type]


def test_a_remembered_ran_digest_is_the_digest_of_that_step() -> None:
    step: dict[str, Any] = {"id": 1, "tool": "echo", "args": {"x": 1}, "depends_on": []}
    same_content = {**step}
    other = {**step, "args": {"x": 2}}
    assert ran_digest(step) == ran_digest(step) == step_digest(step, goal="")[:16]  # type: ignore[arg-type]
    assert ran_digest(same_content) == ran_digest(step)  # type: ignore[arg-type]
    assert ran_digest(other) != ran_digest(step)  # type: ignore[arg-type]


def test_a_waiter_is_woken_from_its_own_loop_and_from_another_thread() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        here: asyncio.Future[None] = loop.create_future()
        wake_soon(here, lambda f: f.set_result(None))
        await asyncio.wait_for(here, 5)
        there: asyncio.Future[None] = loop.create_future()
        thread = threading.Thread(target=wake_soon, args=(there, lambda f: f.set_result(None)))
        thread.start()
        await asyncio.wait_for(there, 5)  # a loop asleep in select wakes up
        thread.join()

    asyncio.run(main())
