"""Start real servers for tests: ``langgraph dev`` and PostgreSQL, on 127.0.0.1 only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


@contextmanager
def langgraph_dev(
    log: Path, extra_env: dict[str, str] | None = None, config: Path | None = None
) -> Iterator[str]:
    """Run ``langgraph dev`` on a free loopback port with no network calls; yield its URL.

    The server gets no OpenAI key unless ``extra_env`` gives one; ``config`` is the
    langgraph.json to serve (default: the project's).
    """
    port = free_port()
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "LANGSMITH_TRACING": "false",
    }
    env.pop("OPENAI_API_KEY", None)
    env.update(extra_env or {})
    cli = Path(sys.executable).with_name("langgraph")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(cli),
                "dev",
                "--no-browser",
                "--no-reload",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--config",
                str(config or ROOT / "langgraph.json"),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_http(f"{url}/ok", proc, timeout=90)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def find_pg_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl), if installed."""
    for found in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (found / "initdb").exists():
            return found
    which = shutil.which("initdb")
    return Path(which).parent if which else None


@contextmanager
def postgres() -> Iterator[str]:
    """Run a throwaway PostgreSQL on a free loopback port (Debian's server programs); yield its URL.

    As root, the server runs as the ``postgres`` user (initdb refuses root).
    """
    import tempfile

    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise FileNotFoundError(
            "PostgreSQL's server programs are not installed (Debian: apt-get install postgresql)"
        )
    base = Path(tempfile.mkdtemp(prefix="planexec-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    port = free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("postgres")
        for path in (base, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
        base.chmod(0o755)
        prefix = ["runuser", "-u", "postgres", "--"]

    def run(*args: str) -> None:
        subprocess.run(
            [*prefix, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(base / "log"),
        "-w",
        "start",
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)
