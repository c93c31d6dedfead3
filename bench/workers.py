"""Worker processes sharing one PostgreSQL through the runs API: threads against worker count.

Horizontal scale without LangGraph Server: each worker is a process with its own runs API
(``Runs.aopen`` on one PostgreSQL) running at most ``--jobs`` threads at once, as a server
worker runs ``N_JOBS_PER_WORKER``. ``--threads`` threads (bench/slowmodel.py: one slow planner
call, one step) are dealt round-robin to the workers and all submitted at once. For each model
latency (the slow one, and 0: no waiting, so CPU is the limit) and worker count it prints wall
time, threads/s, the speedup over the first row (one worker) measured in the same run, p50/p95
of a thread's latency (from submission), and the CPU time per thread of the workers and of
PostgreSQL (its server processes, background ones included): what a capacity estimate scales.

    python -m bench.workers                     # 60 threads, 1 2 3 workers, 10 jobs each
    python -m bench.workers --threads 120 --workers 1 2 4 --jobs 10 20 --latency 1.5
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import math
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from typing import Any

import psutil

from bench.slowmodel import CONTEXT, TASK, check_model_calls, machine, markdown, row, slow_model
from tests.servers import PostgresServer

# mp: the "spawn" context's Event, Queue and Value (typeshed types them per context)
Sync = Any


def worker_main(url: str, threads: int, jobs: int, ready: Sync, go: Sync, out: Sync) -> None:
    """Run ``threads`` threads, ``jobs`` at a time, once ``go`` is set; put the figures."""
    asyncio.run(run_worker(url, threads, jobs, ready, go, out))


async def run_worker(url: str, threads: int, jobs: int, ready: Sync, go: Sync, out: Sync) -> None:
    """One worker: warm up (imports, graph, model client), then run its share of threads."""
    from planexec import Context
    from planexec.runs import Runs, new_run

    context = Context(**CONTEXT)
    async with Runs.aopen(url, approval="never") as runs:
        await runs.astart(new_run(TASK, context=context))
        slots = asyncio.Semaphore(jobs)

        async def one() -> tuple[float, str]:
            async with slots:
                result = await runs.astart(new_run(TASK, context=context))
            return time.time(), result.status

        ready.set()
        await asyncio.to_thread(go.wait)
        cpu = time.process_time()
        done = await asyncio.gather(*(one() for _ in range(threads)))
        cpu = time.process_time() - cpu
    out.put({"ends": [end for end, _ in done], "statuses": [s for _, s in done], "cpu": cpu})


def pg_cpu(postmaster: psutil.Process) -> float:
    """CPU seconds PostgreSQL's processes used so far (ended backends count in the parent's).

    Read it while no backend starts or ends: one that ends between the two readings below
    would be counted in neither.
    """
    total = 0.0
    for child in postmaster.children():
        times = child.cpu_times()
        total += times.user + times.system
    times = postmaster.cpu_times()
    return total + times.user + times.system + times.children_user + times.children_system


def settle(postmaster: psutil.Process, server_processes: set[int]) -> None:
    """Wait until the workers' backends have ended (only the server's own processes remain)."""
    deadline = time.monotonic() + 30
    while {p.pid for p in postmaster.children()} - server_processes:
        if time.monotonic() > deadline:
            raise RuntimeError("the workers' PostgreSQL sessions did not end")
        time.sleep(0.05)


def measure(
    url: str, postmaster: psutil.Process, threads: int, workers: int, jobs: int
) -> dict[str, Any]:
    """Run ``threads`` threads on ``workers`` worker processes; return the figures."""
    spawn = mp.get_context("spawn")
    ready = [spawn.Event() for _ in range(workers)]
    go, out = spawn.Event(), spawn.Queue()
    shares = [threads // workers + (i < threads % workers) for i in range(workers)]
    procs = [
        spawn.Process(target=worker_main, args=(url, share, jobs, ready[i], go, out))
        for i, share in enumerate(shares)
    ]
    server_processes = {p.pid for p in postmaster.children()}
    for proc in procs:
        proc.start()
    for event, proc in zip(ready, procs, strict=True):
        while not event.wait(1):
            if not proc.is_alive():
                raise RuntimeError(f"a worker exited with {proc.exitcode} before it was ready")
    db_before, started = pg_cpu(postmaster), time.time()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    settle(postmaster, server_processes)
    db_cpu = pg_cpu(postmaster) - db_before
    ends = [end for r in results for end in r["ends"]]
    failed = [s for r in results for s in r["statuses"] if s != "succeeded"]
    if failed:
        raise RuntimeError(f"{len(failed)} threads did not succeed: {sorted(set(failed))}")
    return {
        "wall": max(ends) - started,
        "latencies": [end - started for end in ends],
        "worker_cpu": sum(r["cpu"] for r in results) / threads,
        "db_cpu": db_cpu / threads,
    }


HEADER = ["workers × jobs", "wall", "threads/s", "p50", "p95", "ideal wall", "× first row"]
HEADER += ["worker CPU/thread", "PG CPU/thread"]


def table(
    args: argparse.Namespace, url: str, postmaster: psutil.Process, latency: float
) -> tuple[list[list[str]], dict[str, Any]]:
    """Measure every worker count and jobs setting at one model latency; return the rows and
    the last row's figures."""
    rows: list[list[str]] = []
    base = 0.0
    with slow_model(latency) as (env, requests):
        os.environ.update(env)  # the spawned workers inherit it
        for jobs in args.jobs:
            for workers in args.workers:
                asked = len(requests)
                got = measure(url, postmaster, args.threads, workers, jobs)
                check_model_calls(len(requests) - asked, args.threads + workers)  # + warm-ups
                ideal = latency * math.ceil(args.threads / (workers * jobs))
                cells = row(
                    f"{workers} × {jobs}", args.threads, got["wall"], got["latencies"], ideal
                )
                base = base or got["wall"]
                cells += [f"{base / got['wall']:.2f}", f"{got['worker_cpu'] * 1000:.0f} ms"]
                rows.append([*cells, f"{got['db_cpu'] * 1000:.1f} ms"])
    return rows, got


def main() -> None:
    """Print one table per model latency, then the capacity estimate from CPU per thread."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10])
    parser.add_argument("--latency", type=float, default=1.5)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="planexec-bench-workers-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["PLANEXEC_WORKSPACE_ROOT"] = root
    print(f"{args.threads} threads submitted at once; {machine()}")
    server = PostgresServer()
    server.start()
    try:
        pid = int((server.data / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        for latency in (args.latency, 0.0):
            rows, last = table(args, server.url, postmaster, latency)
            print(f"\nmodel latency {latency:.1f} s per call")
            print(markdown(HEADER, rows))
    finally:
        server.remove()
    worker_cpu, db_cpu = last["worker_cpu"], last["db_cpu"]
    print(
        f"\nEstimate from CPU per thread (the last row): one worker core runs at most "
        f"{1 / worker_cpu:.0f} threads/s of this shape, one PostgreSQL core serves "
        f"{1 / db_cpu:.0f}; the database becomes the limit at about "
        f"{worker_cpu / db_cpu:.0f} busy worker cores per database core."
    )


if __name__ == "__main__":
    main()
