"""Start real servers for tests: ``langgraph dev`` and PostgreSQL, on 127.0.0.1 only."""

from __future__ import annotations

import json
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


def scratch_config(folder: Path) -> Path:
    """Write the project's langgraph.json into ``folder`` with absolute paths and no .env."""
    data = json.loads((ROOT / "langgraph.json").read_text())
    data["dependencies"] = [str(ROOT)]
    data["graphs"] = {
        name: str((ROOT / spec.partition(":")[0]).resolve()) + ":" + spec.partition(":")[2]
        for name, spec in data["graphs"].items()
    }
    data["env"] = {}  # a test sets the server's environment itself (offline, no keys)
    served = folder / "langgraph.json"
    served.write_text(json.dumps(data))
    return served


@contextmanager
def langgraph_dev(
    log: Path,
    extra_env: dict[str, str] | None = None,
    config: Path | None = None,
    extra_args: list[str] | None = None,
) -> Iterator[str]:
    """Run ``langgraph dev`` on a free loopback port with no network calls; yield its URL.

    The server runs in ``log``'s folder (its ``.langgraph_api`` goes there, never in the
    repo). It gets no OpenAI key unless ``extra_env`` gives one; ``config`` is the
    langgraph.json to serve (default: a copy of the project's, without the developer's .env).
    """
    port = free_port()
    config = config or scratch_config(log.parent)
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
                str(config),
                *(extra_args or []),
            ],
            cwd=log.parent,
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


def _reachable_tmp() -> str | None:
    """Return a temp folder the ``postgres`` user can reach, for a root caller's cluster.

    The usual temp root, unless a folder on its way is closed to others (a ``TMPDIR`` made by
    ``mktemp -d`` is 0700): then ``/tmp`` itself. None: the usual one.
    """
    import tempfile

    usual = Path(tempfile.gettempdir()).resolve()
    if all(os.stat(folder).st_mode & 0o001 for folder in (usual, *usual.parents)):
        return None
    return "/tmp"


class PostgresServer:
    """A throwaway PostgreSQL cluster on a free loopback port that a test can stop and restart.

    ``stop()`` is ``pg_ctl stop -m immediate`` (the server dies as if it crashed: no shutdown
    checkpoint, every connection dropped); ``start()`` brings it back on the same port and data.
    As root, the server runs as the ``postgres`` user (initdb refuses root).
    """

    def __init__(self) -> None:
        """Create the cluster (initdb) in a temp folder; not started yet."""
        import tempfile

        bin_dir = find_pg_bin()
        if bin_dir is None:
            raise FileNotFoundError(
                "PostgreSQL's server programs are not installed "
                "(Debian: apt-get install postgresql)"
            )
        self.bin_dir = bin_dir
        root = os.geteuid() == 0
        self.base = Path(
            tempfile.mkdtemp(prefix="planexec-pg-", dir=_reachable_tmp() if root else None)
        )
        self.data, sockets = self.base / "data", self.base / "sockets"
        sockets.mkdir()
        self.port = free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam("postgres")
            for path in (self.base, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
            self.base.chmod(0o755)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.options = f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        initdb = str(bin_dir / "initdb")
        self._run(initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")

    def _run(self, *args: str) -> None:
        subprocess.run(  # in its own folder: the postgres user may not enter the caller's
            [*self.prefix, *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.base,
        )

    def _pg_ctl(self, *args: str) -> list[str]:
        return [str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args]

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run(*self._pg_ctl("-o", self.options, "-l", str(self.base / "log"), "-w", "start"))

    def stop(self) -> None:
        """Stop the server at once (``-m immediate``): connections drop, nothing is flushed."""
        command = [*self.prefix, *self._pg_ctl("-m", "immediate", "stop")]
        subprocess.run(command, check=False, capture_output=True, cwd=self.base)

    def remove(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@contextmanager
def postgres() -> Iterator[str]:
    """Run a throwaway PostgreSQL on a free loopback port; yield its URL (see PostgresServer)."""
    server = PostgresServer()
    try:
        server.start()
        yield server.url
    finally:
        server.remove()
