"""Concurrent threads through ``langgraph dev``: throughput and latency against jobs per worker.

A local OpenAI-compatible server answers every planner call after ``--latency`` seconds (1.5 s,
like a hosted model writing a short plan); each thread plans one step (``list_files``) and runs
it with approval ``never``, so a thread is one slow model call plus planexec's own work.
Prints, for each ``--n-jobs-per-worker``, the wall time of ``--threads`` concurrent threads,
threads/s, and p50/p95 of a thread's latency, with the ideal (latency × waves) beside it.

    python -m bench.serve --threads 20 --jobs 0 10 20    # 0: langgraph dev's default
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import math
import statistics
import tempfile
import threading
import time
from pathlib import Path

from langgraph_sdk import get_client

from tests.servers import free_port, langgraph_dev

PLAN = {
    "goal": "list the files",
    "steps": [{"id": 1, "tool": "list_files", "args": {}, "description": "list the files"}],
}


def slow_model_server(latency: float) -> str:
    """Start an OpenAI-compatible server that answers every call with PLAN after ``latency``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            json.loads(self.rfile.read(int(self.headers["content-length"])))
            time.sleep(latency)
            call = {"id": "c1", "type": "function"}
            call["function"] = {"name": "Plan", "arguments": json.dumps(PLAN)}
            reply = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "slow",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
            }
            data = json.dumps(reply).encode()  # plain JSON: planexec falls back from streaming
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


async def one_thread(client: object, context: dict[str, object]) -> float:
    """Run one thread to its end; return its latency in seconds."""
    started = time.perf_counter()
    thread = await client.threads.create()  # type: ignore[attr-defined]
    await client.runs.wait(  # type: ignore[attr-defined]
        thread["thread_id"], "planexec", input={"task": "list the files"}, context=context
    )
    state = await client.threads.get_state(thread["thread_id"])  # type: ignore[attr-defined]
    final = (state["values"].get("final") or {}).get("status")
    if final != "succeeded":
        raise RuntimeError(f"thread ended {final!r}: {json.dumps(state, default=str)[:1500]}")
    return time.perf_counter() - started


async def measure(url: str, threads: int) -> tuple[float, list[float]]:
    """Run ``threads`` threads at once; return the wall time and each thread's latency."""
    client = get_client(url=url)
    context = {"planner_model": "openai:slow", "approval": "never"}
    await one_thread(client, context)  # warm up: imports, graph, first model client
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one_thread(client, context) for _ in range(threads)))
    return time.perf_counter() - started, sorted(latencies)


def main() -> None:
    """Print one row per jobs-per-worker setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument(
        "--jobs", type=int, nargs="+", default=[0, 10, 20], help="0: langgraph dev's default"
    )
    parser.add_argument("--latency", type=float, default=1.5)
    args = parser.parse_args()
    model_url = slow_model_server(args.latency)
    env = {
        "OPENAI_API_KEY": "bench-key-not-secret",
        "OPENAI_BASE_URL": model_url,
        "PLANEXEC_APPROVAL": "never",
    }
    print(f"{args.threads} concurrent threads, one {args.latency:.1f} s model call each")
    print("| jobs per worker | wall | threads/s | p50 | p95 | ideal wall |")
    print("|---|---|---|---|---|---|")
    for jobs in args.jobs:
        with tempfile.TemporaryDirectory() as scratch:
            env["PLANEXEC_WORKSPACE_ROOT"] = str(Path(scratch) / "runs")
            log = Path(scratch) / "server.log"
            flags = ["--n-jobs-per-worker", str(jobs)] if jobs else []
            with langgraph_dev(log, env, extra_args=flags) as url:
                wall, lat = asyncio.run(measure(url, args.threads))
        p95 = lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)]
        ideal = args.latency * math.ceil(args.threads / (jobs or 1))
        print(
            f"| {jobs or 'default'} | {wall:.2f} s | {args.threads / wall:.1f} | "
            f"{statistics.median(lat):.2f} s | {p95:.2f} s | {ideal:.1f} s |"
        )


if __name__ == "__main__":
    main()
