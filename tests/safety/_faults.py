"""The fault harness (the "nemesis"): one thread that injects faults, one at a time or several.

Every fault is bounded in time and count, targets only loopback processes of this run (and the
local PostgreSQL), and records ``fault`` start and end events in the history. Each one undoes
itself in a ``finally``: a replica is restarted, PostgreSQL is back and accepting connections,
a paused worker is resumed, the proxy passes everything again.

=============== ==============================================================================
``kill``        SIGKILL one of the server replicas, restart it 0.3-1.5 s later (same port/DB)
``pg-restart``  ``pg_ctlcluster ... restart`` of the local PostgreSQL (lock DB and resource DB)
``proxy``       3-6 s of drops, delays (up to 2.5 s), duplicates and cuts after processing
``pause``       SIGSTOP one worker *process* for TTL + 1-2 s, then SIGCONT
``force``       a burst of 3-8 ``force_release`` calls on random keys
=============== ==============================================================================
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from tests._server_process import ServerProcess
from tests.safety._history import Recorder
from tests.safety._proxy import ChaosProxy, Odds
from volcano_sdk import VolcanoClient, VolcanoError

__all__ = ["ALL_FAULTS", "Nemesis", "pg_ready", "pg_restart_available", "restart_postgres"]

ALL_FAULTS = ("kill", "pg-restart", "proxy", "pause", "force")
PG_READY_TIMEOUT = 60.0


def pg_ready(url: str, timeout: float = PG_READY_TIMEOUT) -> bool:
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except Exception:
            time.sleep(0.2)
    return False


def pg_restart_available(admin_url: str) -> str | None:
    """Why the ``pg-restart`` fault cannot run here, or None if it can."""
    host = urlsplit(admin_url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        return f"PostgreSQL is not on loopback ({host})"
    if shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        return "pg_ctlcluster (Debian's postgresql-common) is not installed"
    if os.geteuid() != 0:
        return "restarting PostgreSQL needs root"
    return None


def restart_postgres(admin_url: str) -> None:
    """Restarts the local cluster and waits until it accepts connections again."""
    versions = sorted(os.listdir("/etc/postgresql"))
    cmd = ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.decode(errors='replace')}")
    finally:
        if not pg_ready(admin_url):
            # Last resort: it must be up for whatever runs after us.
            subprocess.run([*cmd[:-1], "start"], check=False, capture_output=True, timeout=60)
            pg_ready(admin_url)


class Nemesis:
    def __init__(
        self,
        faults: Sequence[str],
        *,
        rng: random.Random,
        recorder: Recorder,
        replicas: Sequence[ServerProcess],
        proxy: ChaosProxy,
        pausable: Callable[[], list[subprocess.Popen[bytes]]],
        client: VolcanoClient,
        keys: Sequence[str],
        ttl: int,
        pg_admin_url: str | None,
        max_faults: int = 1000,
        quiet: tuple[float, float] = (1.0, 4.0),
    ) -> None:
        unknown = set(faults) - set(ALL_FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; choose from {ALL_FAULTS}")
        if "pg-restart" in faults and pg_admin_url is None:
            raise ValueError("pg-restart needs the PostgreSQL admin URL")
        self.faults = list(faults)
        self.rng = rng
        self.rec = recorder
        self.replicas = list(replicas)
        self.proxy = proxy
        self.pausable = pausable
        self.client = client
        self.keys = list(keys)
        self.ttl = ttl
        self.pg_admin_url = pg_admin_url
        self.max_faults = max_faults
        self.quiet = quiet
        self.max_pg_restarts = 1_000_000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    # -- the faults -----------------------------------------------------------------------------

    def kill(self) -> None:
        i = self.rng.randrange(len(self.replicas))
        replica = self.replicas[i]
        self.rec.record("info", "fault", kind="kill", phase="start", replica=i)
        try:
            replica.kill()
            time.sleep(self.rng.uniform(0.3, 1.5))
        finally:
            replica.process = None
            replica.start()
            self.rec.record("info", "fault", kind="kill", phase="end", replica=i)

    def pg_restart(self) -> None:
        if self.max_pg_restarts <= 0:
            return
        self.max_pg_restarts -= 1
        assert self.pg_admin_url is not None
        self.rec.record("info", "fault", kind="pg-restart", phase="start")
        try:
            restart_postgres(self.pg_admin_url)
        finally:
            self.rec.record("info", "fault", kind="pg-restart", phase="end")

    def proxy_faults(self) -> None:
        odds = Odds(
            drop=self.rng.uniform(0.05, 0.15),
            delay=self.rng.uniform(0.1, 0.3),
            duplicate=self.rng.uniform(0.1, 0.3),
            cut=self.rng.uniform(0.1, 0.3),
            max_delay=2.5,
            forge=self.proxy.base_odds.forge,
        )
        self.rec.record("info", "fault", kind="proxy", phase="start", **vars(odds))
        try:
            self.proxy.odds = odds
            self._stop.wait(self.rng.uniform(3.0, 6.0))
        finally:
            self.proxy.odds = self.proxy.base_odds
            self.rec.record("info", "fault", kind="proxy", phase="end")

    def pause(self) -> None:
        running = [p for p in self.pausable() if p.poll() is None]
        if not running:
            return
        proc = self.rng.choice(running)
        self.rec.record("info", "fault", kind="pause", phase="start", pid=proc.pid)
        try:
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(self.ttl + self.rng.uniform(1.0, 2.0))  # past the TTL, not interruptible
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            self.rec.record("info", "fault", kind="pause", phase="end", pid=proc.pid)

    def force(self) -> None:
        self.rec.record("info", "fault", kind="force", phase="start")
        try:
            for _ in range(self.rng.randint(3, 8)):
                with contextlib.suppress(VolcanoError):
                    self.client.locks.force_release(self.rng.choice(self.keys))
                time.sleep(self.rng.uniform(0.05, 0.4))
        finally:
            self.rec.record("info", "fault", kind="force", phase="end")

    # -- the schedule ----------------------------------------------------------------------------

    def _one(self, kind: str) -> None:
        {
            "kill": self.kill,
            "pg-restart": self.pg_restart,
            "proxy": self.proxy_faults,
            "pause": self.pause,
            "force": self.force,
        }[kind]()

    def run(self, until: float) -> None:
        """Faults in shuffled rounds (each enabled kind once per round), some at once."""
        done = 0
        while done < self.max_faults and not self._stop.is_set():
            order = list(self.faults)
            self.rng.shuffle(order)
            for kind in order:
                if self._stop.wait(self.rng.uniform(*self.quiet)) or time.monotonic() >= until:
                    return
                try:
                    if kind != "proxy" and "proxy" in self.faults and self.rng.random() < 0.3:
                        # Combined: this fault while the proxy misbehaves too.
                        side = threading.Thread(target=self.proxy_faults, daemon=True)
                        side.start()
                        self._one(kind)
                        side.join(10)
                    else:
                        self._one(kind)
                except Exception as exc:  # a harness failure is reported, never hidden
                    self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                done += 1

    def start(self, until: float) -> Nemesis:
        self._thread = threading.Thread(target=self.run, args=(until,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(90)
        self.proxy.odds = self.proxy.base_odds
