"""Start the test MCP servers: stdio entries for a config, HTTP servers on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "src")])


def stdio_entry(module: str, tag: str = "", **env: str) -> dict[str, Any]:
    """A config entry starting ``tests.mcp_servers.<module>`` on stdio (``--tag`` if given)."""
    return {
        "command": sys.executable,
        "args": ["-m", f"tests.mcp_servers.{module}", *(["--tag", tag] if tag else [])],
        "env": {"PYTHONPATH": PYTHONPATH, **env},
        "cwd": str(ROOT),
    }


@contextmanager
def http_server(module: str, port: int | None = None) -> Iterator[str]:
    """Run ``tests.mcp_servers.<module>`` on streamable HTTP at 127.0.0.1; yield its URL."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    proc = subprocess.Popen(
        [sys.executable, "-m", f"tests.mcp_servers.{module}", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"MCP server {module} exited with {proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"MCP server {module} did not listen on {port}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def children(pid: int | None = None, holding: str = "tests.mcp_servers") -> list[int]:
    """Live child processes of ``pid`` (default: this one; 0: any) whose command line holds
    ``holding``."""
    parent = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if parent in (0, int(fields[1])) and fields[0] != "Z" and holding in cmdline:
            found.append(int(entry.name))
    return found
