"""A throwaway PostgreSQL for the benchmarks and the soak, on a free loopback port.

Benchmarks do not import the test suite (nor the tests the benchmarks), so this is the
bench's own copy of the small cluster helper that tests/servers.py keeps for the tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_pg_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl), if installed."""
    for found in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (found / "initdb").exists():
            return found
    which = shutil.which("initdb")
    return Path(which).parent if which else None


class PostgresServer:
    """A PostgreSQL cluster in a temp folder that can be stopped (as if it crashed) and restarted.

    As root, the server runs as the ``postgres`` user (initdb refuses root).
    """

    def __init__(self) -> None:
        bin_dir = find_pg_bin()
        if bin_dir is None:
            raise FileNotFoundError(
                "PostgreSQL's server programs are not installed "
                "(Debian: apt-get install postgresql)"
            )
        self.bin_dir = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="planexec-bench-pg-"))
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
        self.run(initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")

    def run(self, *args: str) -> None:
        subprocess.run(
            [*self.prefix, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def pg_ctl(self, *args: str) -> list[str]:
        return [str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args]

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.run(*self.pg_ctl("-o", self.options, "-l", str(self.base / "log"), "-w", "start"))

    def stop(self) -> None:
        """Stop the server at once (``-m immediate``): connections drop, nothing is flushed."""
        command = [*self.prefix, *self.pg_ctl("-m", "immediate", "stop")]
        subprocess.run(command, check=False, capture_output=True)

    def remove(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


@contextmanager
def postgres() -> Iterator[str]:
    """Run a throwaway PostgreSQL; yield its URL."""
    server = PostgresServer()
    try:
        server.start()
        yield server.url
    finally:
        server.remove()
