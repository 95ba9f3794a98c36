"""A throwaway PostgreSQL cluster for tests and benchmarks: Unix socket only, no fsync.

    with Cluster() as cluster:
        dsn = cluster.create_database()   # a fresh, empty database

When we are root, the cluster runs as `nobody` (initdb refuses root); its directory is made in
/tmp (which `nobody` can traverse) and removed at the end.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psycopg

USER = "bot"
PORT = 5432  # only names the socket file: the socket directory is private to this cluster
FIX = "install PostgreSQL's server binaries: sh scripts/system-deps (Debian package postgresql)"


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the cluster would not start."""


def find_bindir() -> Path:
    """The newest Debian install (/usr/lib/postgresql/<version>/bin), else initdb on PATH."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
        return Path(newest).parent
    initdb = shutil.which("initdb")
    if initdb is not None:
        return Path(initdb).resolve().parent
    raise ClusterUnavailable(f"no initdb found: {FIX}")


class Cluster:
    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="bot-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self._numbers = itertools.count(1)
        self._as_nobody = os.geteuid() == 0
        self.started_in = 0.0  # seconds initdb and start took

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        self.sockets.mkdir()
        if self._as_nobody:
            for path in (self.root, self.sockets):
                os.chown(path, 65534, 65534)  # nobody:nogroup
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "--no-sync",
            "-E", "UTF8", "--locale=C", "--no-instructions",
        )  # fmt: skip
        self.resume()
        self.started_in = time.monotonic() - began

    def halt(self) -> None:
        """Stop the server and keep its data (a database restart or outage): `resume` starts
        it again. Connections are cut at once (`-m fast`)."""
        self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data))

    def resume(self) -> None:
        options = (
            f"-k {self.sockets} -c listen_addresses='' -F -p {PORT}"
            " -c full_page_writes=off -c synchronous_commit=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
            "-l", str(self.root / "postgres.log"), "-o", options,
        )  # fmt: skip

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-m", "immediate", "-D", str(self.data), check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases ----------------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.sockets} port={PORT} user={USER} dbname={dbname}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; its DSN."""
        name = name or f"t_{os.getpid()}_{next(self._numbers)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    # -- helpers ------------------------------------------------------------------------------

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_nobody:
            command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd="/")
        if check and done.returncode != 0:
            log = self.root / "postgres.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ClusterUnavailable(
                f"{tool} failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{tail}"
            )
