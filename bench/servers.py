"""The processes a run starts and stops: volcano-locks on SQLite and PostgreSQL, the no-op
endpoint, etcd, and a scratch PostgreSQL database.  Everything listens on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests._server_process import REPO_ROOT, ServerProcess, create_project

from ._util import free_port, wait_port

PG_ADMIN_URL = os.environ.get(
    "VOLCANO_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@dataclass
class Volcano:
    """A running volcano-locks server and one project's keys."""

    backend: str
    server: ServerProcess
    anon_key: str
    service_key: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid


@contextlib.contextmanager
def volcano(backend: str, database_url: str, extra_args: tuple[str, ...] = ()) -> Iterator[Volcano]:
    try:
        anon, service = create_project(database_url, "bench")
    except RuntimeError:  # PostgreSQL restarting under another session's chaos test: once more
        time.sleep(5)
        anon, service = create_project(database_url, "bench")
    server = ServerProcess(database_url, extra_args=extra_args)
    server.start()
    try:
        yield Volcano(backend, server, anon, service)
    finally:
        server.close()


@contextlib.contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="volcano-bench-") as tmp:
        yield f"sqlite:///{tmp}/locks.db"


def _pg_url(dbname: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{dbname}"


def postgres_available() -> str | None:
    """None when the admin database answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except Exception as exc:  # any failure means "skip with a note"
        return f"PostgreSQL at {PG_ADMIN_URL} unreachable: {type(exc).__name__}"


def _admin(statement: str, patience: float = 30.0) -> None:
    """Runs one statement on the admin database, retrying while PostgreSQL restarts (other
    sessions on this machine restart it on purpose)."""
    import psycopg

    deadline = time.monotonic() + patience
    while True:
        try:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as admin:
                admin.execute(statement)
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh database dropped at exit; yields its URL."""
    name = f"volcano_bench_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url(name)
    finally:
        try:
            _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception as exc:
            print(f"could not drop the scratch database {name}: {exc}", file=sys.stderr)


class Process:
    """A child process in its own session, stopped with SIGTERM then SIGKILL."""

    def __init__(self, args: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.log = tempfile.NamedTemporaryFile(prefix="volcano-bench-", suffix=".log")  # noqa: SIM115
        self.proc = subprocess.Popen(
            args,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if not wait_port(port):
            self.stop()
            raise RuntimeError(f"{args[0]} did not listen on {port}: {self.log_text()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


@contextlib.contextmanager
def noop_server() -> Iterator[str]:
    port = free_port()
    proc = Process(
        [
            sys.executable, "-m", "uvicorn", "bench.noop_app:app",
            "--host", "127.0.0.1", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools",
            "--no-access-log", "--log-level", "warning",
        ],
        port,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stop()


def etcd_binary() -> str | None:
    return shutil.which("etcd")


@contextlib.contextmanager
def etcd_server() -> Iterator[str]:
    """etcd on free loopback ports with a temporary data dir; yields the client URL."""
    binary = etcd_binary()
    assert binary is not None
    client_port, peer_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="volcano-bench-etcd-") as data:
        client = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        proc = Process(
            [
                binary, "--name", "bench", "--data-dir", data,
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"bench={peer}",
                "--log-level", "error",
            ],
            client_port,
        )  # fmt: skip
        try:
            _wait_etcd(client)
            yield client
        finally:
            proc.stop()


def _wait_etcd(url: str) -> None:
    import httpx

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError("etcd did not become healthy")
