"""The thread the serving benchmarks run, and the slow model that plans it.

A thread is one planner call (answered after ``latency`` seconds by a local OpenAI-compatible
server, tests/openai_server.py, as a hosted model writing a short plan would be) and one
``list_files`` step, with approval ``never``: one slow model call plus planexec's own work.
Plan memory is off (every thread has the same task: with it on, every thread after the first
would reuse the first one's plan and never call the model), and the benches check that the
model was asked once per thread.
bench/serve.py runs it through ``langgraph dev``, bench/workers.py through worker processes.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.openai_server import Pace, serve, tool_call_message

TASK = "list the files"
PLAN = {
    "goal": TASK,
    "steps": [{"id": 1, "tool": "list_files", "args": {}, "description": "list the files"}],
}
MODEL = "openai:slow"
CONTEXT: dict[str, Any] = {"planner_model": MODEL, "approval": "never", "plan_memory": False}
"""A thread's context (as the server's API takes it; ``Context(**CONTEXT)`` in Python)."""


@contextmanager
def slow_model(latency: float) -> Iterator[tuple[dict[str, str], list[dict[str, Any]]]]:
    """Serve the planner for ``latency`` s a call; yield the environment that points at it and
    the requests the model has had so far."""
    with serve(lambda body: tool_call_message("Plan", PLAN), Pace(first_token=latency)) as (
        url,
        requests,
    ):
        env = {
            "OPENAI_API_KEY": "bench-key-not-secret",
            "OPENAI_BASE_URL": url,
            "PLANEXEC_APPROVAL": "never",
            "PLANEXEC_PLAN_MEMORY": "off",
        }
        yield env, requests


def check_model_calls(calls: int, threads: int) -> None:
    """Refuse figures of threads that did not all wait on the model once."""
    if calls != threads:
        raise RuntimeError(
            f"the model was asked {calls} times for {threads} threads: the figures would not "
            "measure a model's wait (plan memory on?)"
        )


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile of ``values`` (``share`` 0.95 for p95)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def row(label: Any, threads: int, wall: float, latencies: list[float], ideal: float) -> list[str]:
    """Wall, threads/s, p50, p95 and the ideal wall (latency × waves) as table cells."""
    return [
        str(label),
        f"{wall:.2f} s",
        f"{threads / wall:.1f}",
        f"{statistics.median(latencies):.2f} s",
        f"{percentile(latencies, 0.95):.2f} s",
        f"{ideal:.1f} s",
    ]


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (what the docs quote)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def machine() -> str:
    """One line on where the figures come from."""
    return f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start"
