"""One chaos run: replicas, proxy, workers (threads and processes), nemesis, then the checker.

    result = run(RunConfig(out_dir=..., lock_db_url=..., resource_pg_url=..., ...))
    assert result.violations == []

Layout: ``replicas`` server processes on one PostgreSQL database, all behind one ``ChaosProxy``
(round-robin per connection); ``processes`` worker processes and ``threads`` worker threads of
this process, all talking to the proxy; one counter per lock key, in PostgreSQL (even keys) or
in a SQLite file (odd keys). The nemesis stops injecting ``tail`` seconds before the end, so
the run heals before the final state is read. ``out_dir`` keeps every history file, the merged
``history.jsonl`` and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests._server_process import REPO_ROOT, ServerProcess, create_project
from tests.safety._checker import Violation, check, summarize
from tests.safety._faults import ALL_FAULTS, Nemesis, pg_ready
from tests.safety._history import Recorder, RecordingTransport, history_files, load, write_events
from tests.safety._proxy import ChaosProxy, Odds
from tests.safety._resource import Store
from tests.safety._workload import WorkerConfig, run_threads
from volcano_sdk import VolcanoClient

__all__ = ["RunConfig", "RunResult", "run"]


@dataclass
class RunConfig:
    out_dir: Path
    lock_db_url: str  # a fresh PostgreSQL database for the lock service
    resource_pg_url: str  # a fresh PostgreSQL database for the protected counters
    pg_admin_url: str | None = None  # needed by the pg-restart fault
    duration: float = 90.0
    seed: int = 1
    faults: tuple[str, ...] = ALL_FAULTS
    replicas: int = 3
    processes: int = 2
    threads_per_process: int = 2
    threads: int = 2
    keys: int = 3
    ttl: int = 5
    tail: float = 8.0
    max_pg_restarts: int = 1_000_000
    quiet: tuple[float, float] = (1.0, 4.0)
    # Sabotage, to prove the checker catches a broken system end to end: "forge" (the proxy
    # forges grants that reuse a fence), "naive-store" (no claim before the read).
    sabotage: tuple[str, ...] = ()
    reckless: float = 0.3
    adopt_recovered: bool = False
    work: float = 0.15


@dataclass
class RunResult:
    violations: list[Violation]
    summary: dict[str, Any]
    harness_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations and not self.harness_errors


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(cfg: RunConfig) -> RunResult:
    began = time.monotonic()
    rng = random.Random(cfg.seed)
    out = Path(cfg.out_dir)
    hist_dir = out / "history"
    hist_dir.mkdir(parents=True, exist_ok=True)
    keys = [f"chaos-{i}" for i in range(cfg.keys)]
    sqlite_path = str(out / "resource.db")
    resources = {
        key: ["postgres", cfg.resource_pg_url] if i % 2 == 0 else ["sqlite", sqlite_path]
        for i, key in enumerate(keys)
    }
    for backend, target in {tuple(v) for v in resources.values()}:
        store = Store(backend, target)
        store.setup([k for k, v in resources.items() if v == [backend, target]])
        store.close()

    anon, service = create_project(cfg.lock_db_url, f"chaos-{cfg.seed}")
    replicas: list[ServerProcess] = []
    procs: list[subprocess.Popen[bytes]] = []
    main_rec = Recorder(hist_dir / "main.jsonl", "main")
    nemesis_rec = Recorder(hist_dir / "nemesis.jsonl", "nemesis")
    proxy: ChaosProxy | None = None
    nemesis: Nemesis | None = None
    admin: VolcanoClient | None = None
    harness_errors: list[str] = []
    try:
        for _ in range(cfg.replicas):
            replicas.append(ServerProcess(cfg.lock_db_url).start())
        proxy = ChaosProxy([("127.0.0.1", r.port) for r in replicas], seed=cfg.seed).start()
        if "forge" in cfg.sabotage:
            proxy.base_odds = Odds(forge=0.3)
            proxy.odds = proxy.base_odds
        stop_at = time.monotonic() + cfg.duration
        worker_cfg = WorkerConfig(
            api_url=proxy.url,
            anon_key=anon,
            service_key=service,
            resources=resources,
            history_dir=str(hist_dir),
            stop_at=stop_at,
            seed=cfg.seed,
            ttl=cfg.ttl,
            threads=cfg.threads_per_process,
            reckless=cfg.reckless,
            work=cfg.work,
            naive_store="naive-store" in cfg.sabotage,
            adopt_recovered=cfg.adopt_recovered,
        )
        for i in range(cfg.processes):
            cfg_path = out / f"worker-p{i}.json"
            worker_cfg.first_index = i * cfg.threads_per_process
            worker_cfg.dump(cfg_path)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.safety._workload", str(cfg_path), f"p{i}"],
                    cwd=REPO_ROOT,
                    env=_env(),
                    stdout=(out / f"p{i}.log").open("wb"),
                    stderr=subprocess.STDOUT,
                )
            )
        local_cfg = WorkerConfig(
            **{
                **vars(worker_cfg),
                "threads": cfg.threads,
                "first_index": cfg.processes * cfg.threads_per_process,
            }
        )
        threads = run_threads(local_cfg, "m")
        admin = VolcanoClient(
            anon,
            service,
            proxy.url,
            timeout=httpx.Timeout(3.0, connect=1.0),
            transport=RecordingTransport(nemesis_rec),
        )
        nemesis = Nemesis(
            cfg.faults,
            rng=random.Random(rng.random()),
            recorder=nemesis_rec,
            replicas=replicas,
            proxy=proxy,
            pausable=lambda: procs,
            client=admin,
            keys=keys,
            ttl=cfg.ttl,
            pg_admin_url=cfg.pg_admin_url,
            quiet=cfg.quiet,
        )
        nemesis.max_pg_restarts = cfg.max_pg_restarts
        nemesis.start(until=stop_at - cfg.tail)
        time.sleep(max(0.0, stop_at - cfg.tail - time.monotonic()))
        nemesis.stop()
        harness_errors += nemesis.errors
        for t in threads:
            t.join(max(1.0, stop_at - time.monotonic() + 30))
            if t.is_alive():
                harness_errors.append(f"worker thread {t.name} did not stop")
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            try:
                p.wait(max(1.0, stop_at - time.monotonic() + 30))
            except subprocess.TimeoutExpired:
                harness_errors.append(f"worker process {p.pid} did not stop")
    finally:
        if nemesis is not None:
            nemesis.stop()
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            if p.poll() is None:
                p.kill()
                p.wait(10)
        if admin is not None:
            admin.close()
        if proxy is not None:
            proxy.stop()
        for r in replicas:
            r.close()
        if cfg.pg_admin_url is not None and not pg_ready(cfg.pg_admin_url):
            harness_errors.append("PostgreSQL did not come back")
        nemesis_rec.close()

    for key, (backend, target) in resources.items():
        store = Store(backend, target)
        value, audit = store.dump(key)
        store.close()
        main_rec.record("info", "resource", resource=key, backend=backend, value=value, audit=audit)
    main_rec.close()

    events = load(history_files(hist_dir))
    write_events(out / "history.jsonl", events)
    violations = check(events)
    summary = summarize(events)
    summary["proxy"] = dict(proxy.counts) if proxy is not None else {}
    summary["violations"] = len(violations)
    summary["config"] = {
        "seed": cfg.seed,
        "duration_s": cfg.duration,
        "faults": list(cfg.faults),
        "replicas": cfg.replicas,
        "worker_processes": cfg.processes,
        "threads_per_process": cfg.threads_per_process,
        "worker_threads": cfg.threads,
        "keys": cfg.keys,
        "ttl_s": cfg.ttl,
        "adopt_recovered": cfg.adopt_recovered,
    }
    result = RunResult(violations, summary, harness_errors, time.monotonic() - began)
    summary["wall_s"] = round(result.wall_s, 1)
    summary["harness_errors"] = harness_errors
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "violations.txt").write_text("".join(f"{v}\n" for v in violations))
    return result
