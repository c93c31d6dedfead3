"""Concurrent threads through ``langgraph dev``: throughput and latency against jobs per worker.

Each thread is bench/slowmodel.py's: one planner call of a local OpenAI-compatible model that
answers after ``--latency`` seconds, one ``list_files`` step, approval ``never``. For each
``--n-jobs-per-worker`` (0: ``langgraph dev``'s default, one job) it starts a server, warms
it up with one thread, then runs ``--threads`` threads at once and prints the wall time,
threads/s, p50/p95 of a thread's latency, the ideal wall (latency × waves) and the speedup
over the first row, measured in the same run. ``langgraph dev`` is one worker process with an
in-memory queue and checkpoints: it shows what jobs per worker do, not horizontal scale
(bench/workers.py measures worker processes sharing one PostgreSQL).

    python -m bench.serve                      # 20 threads, jobs 0 (default) 10 20
    python -m bench.serve --threads 40 --jobs 10 40 --latency 1.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from bench.slowmodel import CONTEXT, TASK, check_model_calls, machine, markdown, row, slow_model
from tests.servers import langgraph_dev


async def one_thread(client: Any, context: dict[str, object]) -> float:
    """Run one thread to its end; return its latency in seconds."""
    started = time.perf_counter()
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "planexec", input={"task": TASK}, context=context)
    state = await client.threads.get_state(thread["thread_id"])
    final = (state["values"].get("final") or {}).get("status")
    if final != "succeeded":
        raise RuntimeError(f"thread ended {final!r}: {json.dumps(state, default=str)[:1500]}")
    return time.perf_counter() - started


async def measure(url: str, threads: int) -> tuple[float, list[float]]:
    """Run ``threads`` threads at once; return the wall time and each thread's latency."""
    client = get_client(url=url)
    context = dict(CONTEXT)
    await one_thread(client, context)  # warm up: imports, graph, first model client
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one_thread(client, context) for _ in range(threads)))
    return time.perf_counter() - started, list(latencies)


def main() -> None:
    """Print one row per jobs-per-worker setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument(
        "--jobs", type=int, nargs="+", default=[0, 10, 20], help="0: langgraph dev's default"
    )
    parser.add_argument("--latency", type=float, default=1.5)
    args = parser.parse_args()
    print(f"{args.threads} concurrent threads, one {args.latency:.1f} s model call each")
    print(machine())
    header = ["jobs per worker", "wall", "threads/s", "p50", "p95", "ideal wall", "× first row"]
    rows, base = [], None
    with slow_model(args.latency) as (env, requests):
        for jobs in args.jobs:
            with tempfile.TemporaryDirectory() as scratch:
                env["PLANEXEC_WORKSPACE_ROOT"] = str(Path(scratch) / "runs")
                log = Path(scratch) / "server.log"
                flags = ["--n-jobs-per-worker", str(jobs)] if jobs else []
                asked = len(requests)
                with langgraph_dev(log, env, extra_args=flags) as url:
                    wall, latencies = asyncio.run(measure(url, args.threads))
                check_model_calls(len(requests) - asked, args.threads + 1)  # + the warm-up
            ideal = args.latency * math.ceil(args.threads / (jobs or 1))
            base = base or wall
            label = jobs or "default (1)"
            rows.append(row(label, args.threads, wall, latencies, ideal) + [f"{base / wall:.2f}"])
    print(markdown(header, rows))


if __name__ == "__main__":
    main()
