"""``scripts/bench``: one bounded run of every measurement of issue 6; see ``bench/__init__``.

scripts/bench [--seconds 3] [--rounds 2] [--quick] [--skip-guards] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from . import cycles, imports, peers, profiles, report, servers, wrk
from ._util import Result, Setup, run_interleaved

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 570.0  # the whole run stays under 10 minutes; phases past it are skipped with a note
GUARD_PLAN = [(100, 10, 15.0), (1_000, 10, 15.0), (10_000, 30, 45.0)]  # (N, TTL s, hold s)
GUARD_TIMEOUT_S = {100: 60, 1_000: 120, 10_000: 240}


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.results: dict[str, Result] = {}
        self.profiles: list[profiles.Profile] = []
        self.guards: list[dict[str, object]] = []
        self.imports: dict[str, object] | None = None
        self.notes: list[str] = []

    def left(self) -> float:
        return BUDGET_S - (time.monotonic() - self.started)

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", file=sys.stderr, flush=True)

    def measure(self, key: str, fn: Callable[[], Result], need: float = 10.0) -> None:
        """Runs one measurement, keeping the best round (fastest) under ``key``."""
        if self.left() < need:
            self.results.setdefault(key, Result(key, "?", skipped="time budget exhausted"))
            return
        try:
            result = fn()
        except Exception as exc:
            traceback.print_exc()
            result = Result(key, "?", skipped=f"failed: {type(exc).__name__}: {exc}"[:200])
        old = self.results.get(key)
        if old is None or old.rate is None or (result.rate or 0) > old.rate:
            self.results[key] = result
        self.log(f"{key}: {report.rate_text(result.rate)} cycles/s ({result.errors} errors)")


def _start(stack: contextlib.ExitStack, run: Run) -> dict[str, object]:
    env: dict[str, object] = {}
    env["noop"] = stack.enter_context(servers.noop_server())
    env["sqlite"] = stack.enter_context(
        servers.volcano("sqlite", stack.enter_context(servers.sqlite_url()))
    )
    # The same server without its access log: an A/B of one server-side cost.
    env["sqlite_nolog"] = stack.enter_context(
        servers.volcano(
            "sqlite", stack.enter_context(servers.sqlite_url()), extra_args=("--no-access-log",)
        )
    )
    why = servers.postgres_available()
    if why is None:
        pg_stack = contextlib.ExitStack()
        try:
            url = pg_stack.enter_context(servers.scratch_database())
            env["pg"] = pg_stack.enter_context(servers.volcano("postgresql", url))
            env["pg_table_db"] = pg_stack.enter_context(servers.scratch_database())
            stack.push(pg_stack.pop_all())
        except Exception as exc:
            pg_stack.close()
            env.pop("pg", None)
            run.notes.append(f"PostgreSQL setup failed, its rows skipped: {exc}"[:300])
    else:
        run.notes.append(why)
    if servers.etcd_binary():
        env["etcd"] = stack.enter_context(servers.etcd_server())
    else:
        run.notes.append("etcd not installed (apt-get install -y etcd-server): etcd skipped")
    if not wrk.available():
        run.notes.append("wrk not installed (apt-get install -y wrk): server capacity skipped")
    return env


Maker = Callable[[str], "Setup | Result"]


def _setup(run: Run, key: str, name: str, make: Maker) -> Setup | None:
    try:
        made = make(key)
    except Exception as exc:
        run.results[key] = Result(name, "?", skipped=f"setup failed: {exc}"[:200])
        return None
    if isinstance(made, Result):
        run.results[key] = made
        return None
    return made


def _single_thread(run: Run, env: dict[str, object]) -> None:
    """Every one-thread sync setup, interleaved in slices on one thread (see run_interleaved)."""
    raw = "raw httpx sync, 1 thread"
    noop = str(env["noop"])
    makers: list[tuple[str, str, Maker]] = [
        ("noop.raw_sync", raw, lambda k: cycles.raw_httpx_setup(k, noop, None, "no-op endpoint")),
    ]
    for tag in ("sqlite", "pg"):
        v = env.get(tag)
        if isinstance(v, servers.Volcano):
            makers += [
                (
                    f"{tag}.raw_sync",
                    raw,
                    lambda k, v=v: cycles.raw_httpx_setup(k, v.url, v, v.backend),
                ),
                (f"{tag}.sdk_sync1", "SDK sync", lambda k, v=v: cycles.sdk_sync_setup(k, v)),
            ]
    nolog = env["sqlite_nolog"]
    assert isinstance(nolog, servers.Volcano)
    name = "SDK sync, 1 thread; server with --no-access-log"
    makers.append(("sqlite_nolog.sdk_sync1", name, lambda k: cycles.sdk_sync_setup(k, nolog, name)))
    makers.append(("peer.redis", "Redis", peers.redis_setup))
    if "pg_table_db" in env:
        db = str(env["pg_table_db"])
        makers.append(("peer.pg", "PostgreSQL lease table", lambda k: peers.postgres_setup(k, db)))
    else:
        run.results["peer.pg"] = peers.skipped("PostgreSQL lease table, psycopg", "no PostgreSQL")
    if "etcd" in env:
        etcd = str(env["etcd"])
        makers.append(("peer.etcd", "etcd", lambda k: peers.etcd_setup(k, etcd)))
    else:
        run.results["peer.etcd"] = peers.skipped("etcd 3.4, JSON gateway", "etcd not installed")
    setups = [s for key, name, make in makers if (s := _setup(run, key, name, make))]
    each = run.args.seconds * run.args.rounds
    run.log(f"single-thread setups, interleaved: {len(setups)} x {each:.0f} s")
    try:
        for key, result in run_interleaved(setups, each).items():
            run.results[key] = result
            run.log(f"{key}: {report.rate_text(result.rate)} cycles/s ({result.errors} errors)")
    finally:
        for s in setups:
            with contextlib.suppress(Exception):
                s.close()
    mock = cycles.mock_setups()
    try:
        for key, result in run_interleaved(mock, max(1.0, run.args.seconds / 2)).items():
            result.extra["us_per_cycle"] = 1e6 / (result.rate or 1)
            run.results[key] = result
    finally:
        for s in mock:
            s.close()


def _headline(run: Run, env: dict[str, object]) -> None:
    s = run.args.seconds
    plan: list[tuple[str, Callable[[], Result]]] = []
    for tag in ("sqlite", "pg"):
        v = env.get(tag)
        if not isinstance(v, servers.Volcano):
            continue
        plan += [
            (f"{tag}.sdk_sync16", lambda v=v: cycles.sdk_sync(v, 16, s)),
            (f"{tag}.sdk_async1", lambda v=v: cycles.sdk_async(v, 1, s)),
            (f"{tag}.sdk_async16", lambda v=v: cycles.sdk_async(v, 16, s)),
            (f"{tag}.sdk_async1_aiohttp", lambda v=v: cycles.sdk_async_aiohttp(v, 1, s)),
            (f"{tag}.sdk_async16_aiohttp", lambda v=v: cycles.sdk_async_aiohttp(v, 16, s)),
        ]
        if tag == "sqlite":
            plan.append(
                ("sqlite.sdk_async16_sniffio", lambda v=v: cycles.sdk_async_sniffio(v, 16, s))
            )
    # Rounds interleave these setups, so a burst of load from elsewhere hits all of them alike.
    for i in range(run.args.rounds):
        run.log(f"multi-thread and async setups, round {i + 1} of {run.args.rounds}")
        for key, fn in plan:
            run.measure(key, fn, need=s + 60)


def _ceilings(run: Run, env: dict[str, object]) -> None:
    s = run.args.seconds
    targets = [("noop", str(env["noop"]), None, "no-op endpoint")]
    v = env["sqlite"]
    assert isinstance(v, servers.Volcano)
    targets.append(("sqlite", v.url, v, v.backend))
    for tag, url, volcano, group in targets:
        for client in ("httpx", "aiohttp"):
            run.measure(
                f"{tag}.{client}_async16",
                lambda u=url, vv=volcano, c=client, g=group: cycles.raw_async(u, vv, s, 16, c, g),
                need=s + 60,
            )


def _wrk(run: Run, env: dict[str, object]) -> None:
    seconds = max(3.0, run.args.seconds + 1)
    run.measure("wrk.noop", lambda: wrk.run("no-op endpoint", str(env["noop"]), "a", "s", seconds))
    for tag in ("sqlite", "pg"):
        v = env.get(tag)
        if isinstance(v, servers.Volcano):
            name = f"volcano-locks, {v.backend}"
            run.measure(f"wrk.{tag}", lambda v=v, n=name: _wrk_on(v, n, seconds))


def _wrk_on(v: servers.Volcano, name: str, seconds: float) -> Result:
    return wrk.run(name, v.url, v.anon_key, v.service_key, seconds)


def _mock_load() -> None:
    sdk = cycles.mock_setups()[0]
    end = time.monotonic() + 5
    try:
        while time.monotonic() < end:
            sdk.cycle()
    finally:
        sdk.close()


def _profiles(run: Run, env: dict[str, object]) -> None:
    seconds = 4
    load_s = seconds + 1  # the load outlasts the recording
    v = env["sqlite"]
    assert isinstance(v, servers.Volcano)
    me = os.getpid()
    jobs: list[tuple[str, int, Callable[[], object]]] = [
        ("client: SDK sync, 1 thread (SQLite)", me, lambda: cycles.sdk_sync(v, 1, load_s)),
        ("client: SDK sync, 1 thread, in-process mock transport (no server)", me, _mock_load),
        (
            "client: SDK async, 16 tasks, httpx transport (SQLite)",
            me,
            lambda: cycles.sdk_async(v, 16, load_s),
        ),
        ("server: volcano-locks on SQLite under wrk", v.pid, lambda: _wrk_on(v, "p", load_s)),
    ]
    pg = env.get("pg")
    if isinstance(pg, servers.Volcano):
        title = "server: volcano-locks on PostgreSQL under wrk"
        jobs.append((title, pg.pid, lambda: _wrk_on(pg, "p", load_s)))
    for title, pid, load in jobs:
        if run.left() < seconds + 30:
            run.profiles.append(profiles.Profile(title, skipped="time budget exhausted"))
            continue
        run.log(f"profile: {title}")
        run.profiles.append(profiles.record(title, pid, seconds, load))


def _guards(run: Run, env: dict[str, object]) -> None:
    v = env["sqlite"]
    assert isinstance(v, servers.Volcano)
    plan = GUARD_PLAN[:2] if run.args.quick else GUARD_PLAN
    for n, ttl, hold in plan:
        timeout = GUARD_TIMEOUT_S[n]
        if run.left() < timeout:
            run.guards.append({"n": n, "ttl": ttl, "skipped": "time budget exhausted"})
            continue
        run.log(f"guards: N={n}, TTL={ttl}s, hold {hold:.0f}s")
        args = [sys.executable, "-m", "bench.guards", v.url, v.anon_key, v.service_key]
        try:
            done = subprocess.run(
                [*args, str(n), str(ttl), str(hold)],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=ROOT,
                check=True,
            )
            run.guards.append(json.loads(done.stdout))
        except (subprocess.SubprocessError, ValueError) as exc:
            stderr = getattr(exc, "stderr", "") or ""
            run.guards.append(
                {"n": n, "ttl": ttl, "skipped": f"{type(exc).__name__} {stderr[-300:]}"}
            )
        run.log(f"guards N={n}: {run.guards[-1]}")


def _machine() -> str:
    cpus = os.cpu_count()
    return (
        f"{platform.system()} {platform.release()}, {cpus} CPUs, Python {platform.python_version()}"
    )


def _revision() -> str:
    given = os.environ.get("VOLCANO_BENCH_REVISION")  # set by scripts/bench --committed
    if given:
        return given

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds, best kept")
    parser.add_argument("--quick", action="store_true", help="1 round of 1.5 s, no 10,000 guards")
    parser.add_argument("--skip-guards", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ alone")
    parser.add_argument(
        "--render",
        metavar="JSON",
        help=f"measure nothing: rewrite docs/ from a saved run (each run saves {report.SAVED})",
    )
    args = parser.parse_args(argv)
    if args.render:
        run, meta = report.load(Path(args.render), Run(args))
        print(report.text(run, meta))
        report.write(run, meta, ROOT / "docs")
        return 0
    if args.quick:
        args.seconds, args.rounds = 1.5, 1
    run = Run(args)
    load_before = os.getloadavg()[0]
    run.log("imports")
    run.imports = imports.measure()
    with contextlib.ExitStack() as stack:
        run.log("starting servers")
        env = _start(stack, run)
        _single_thread(run, env)
        _headline(run, env)
        _ceilings(run, env)
        _wrk(run, env)
        _profiles(run, env)
        if not args.skip_guards:
            _guards(run, env)
        run.log("stopping servers")
    elapsed = time.monotonic() - run.started
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(),
        "revision": _revision(),
        "load": f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end",
        "elapsed_s": elapsed,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "notes": run.notes,
    }
    print(report.text(run, meta))
    report.save(run, meta, report.SAVED)
    if not args.no_write:
        report.write(run, meta, ROOT / "docs")
        run.log("wrote docs/benchmarks.md and docs/benchmarks.png")
    run.log(f"done in {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
