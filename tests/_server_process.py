"""A real `volcano-locks serve` subprocess on loopback, for live and fault tests.

    server = ServerProcess("sqlite:////tmp/x.db")
    server.start()          # waits until /health answers
    server.kill()           # SIGKILL, like a crash
    server.restart()        # same port, same database
    server.stop()           # SIGTERM, waits for a clean exit

The server runs as `python -m volcano_server` from this checkout, so it works whether or not
the package is installed.  Its output goes to a log file, shown in failures via `log_text()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

__all__ = ["REPO_ROOT", "ServerProcess", "create_project", "free_port", "run_cli"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("VOLCANO_DATABASE_URL", None)
    env.update(extra or {})
    return env


def run_cli(
    *args: str, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`volcano-locks ARGS...` as a subprocess; the caller checks returncode."""
    return subprocess.run(
        [sys.executable, "-m", "volcano_server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(env),
        cwd=REPO_ROOT,
        check=False,
    )


def create_project(database_url: str, name: str) -> tuple[str, str]:
    """A new project's (anon_key, service_key), through the real CLI."""
    done = run_cli("projects", "create", name, "--database", database_url, "--json")
    if done.returncode != 0:
        raise RuntimeError(f"projects create failed: {done.stderr}")
    keys = json.loads(done.stdout)
    return keys["anon_key"], keys["service_key"]


class ServerProcess:
    def __init__(
        self,
        database_url: str,
        *,
        port: int | None = None,
        workers: int = 1,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.database_url = database_url
        self.port = port or free_port()
        self.workers = workers
        self.extra_args = extra_args
        self.env = env
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the object
            prefix="volcano-server-", suffix=".log", delete=False
        )
        self.log_path = Path(self._log.name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> ServerProcess:
        if self.running:
            return self
        args = [
            sys.executable, "-m", "volcano_server", "serve",
            "--database", self.database_url,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--workers", str(self.workers),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args,
            env=_env(self.env),
            cwd=REPO_ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # our signals reach the whole group (uvicorn workers too)
        )
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.process.returncode}:\n{self.log_text()}"
                )
            try:
                if httpx.get(self.url + "/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server not ready after {self.startup_timeout}s:\n{self.log_text()}")

    def _signal(self, sig: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait for a clean exit (SIGKILL after `timeout`); the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(5)
        self._signal(signal.SIGKILL)  # stragglers of the group, if any
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group, like a crash: no cleanup runs."""
        if self.process is None:
            return
        self._signal(signal.SIGKILL)
        self.process.wait(10)

    def restart(self, *, hard: bool = False) -> ServerProcess:
        if hard:
            self.kill()
        else:
            self.stop()
        self.process = None
        return self.start()

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        self.stop()
        self._log.close()
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
