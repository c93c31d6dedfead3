"""The executor's replay callback always releases dependents, even when something is wrong."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

import pytest

from planexec.execution import DependencyGate, outcome, publisher
from tests.helpers import step


def published(fut: Future) -> dict:
    gate = DependencyGate({})
    fut.add_done_callback(publisher(gate, step(1, "echo")))

    async def wait() -> dict:
        return (await asyncio.wait_for(gate.wait_async([1]), timeout=2))[1]

    return asyncio.run(wait())


@pytest.mark.parametrize("how", ["mismatch", "exception"])
def test_a_bad_replayed_result_still_releases_dependents(how):
    fut: Future = Future()
    if how == "mismatch":
        fut.set_result(outcome(2, "succeeded", output="another step's result"))
    else:
        fut.set_exception(RuntimeError("task crashed"))
    result = published(fut)
    assert result["status"] == "failed" and result["error"].startswith("internal error")
