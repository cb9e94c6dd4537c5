"""``scripts/chaos``: a chaos run of any length, its figures, and exit 1 on any violation.

    scripts/chaos --duration 600 --seed 7
    scripts/chaos --duration 60 --faults kill,proxy --replicas 2
    scripts/chaos --recheck /tmp/volcano-chaos-xyz   # the checker alone, on a kept history

It makes two fresh PostgreSQL databases (lock service, protected counters) on the server named
by ``VOLCANO_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``),
drops them afterwards unless ``--keep``, and leaves the histories in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.safety._checker import check, summarize
from tests.safety._faults import ALL_FAULTS, pg_restart_available
from tests.safety._history import load
from tests.safety._run import RunConfig, RunResult, run

DEFAULT_PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _database(admin_url: str, name: str) -> str:
    return urlunsplit(urlsplit(admin_url)._replace(path="/" + name))


def report(result: RunResult) -> str:
    s = result.summary
    lines = [
        f"wall time        {s['wall_s']} s (workload {s['config']['duration_s']} s)",
        f"events           {s['events']} from {s['processes']} recorders",
        f"wire requests    {s['wire_requests']}",
    ]
    for f, outcomes in s["operations"].items():
        lines.append(f"  {f:<15}{json.dumps(outcomes, sort_keys=True)}")
    lines.append(f"increments       {s['increments_acknowledged']} acknowledged")
    lines.append(
        f"hard cases       {s['stale_holders_refused_by_resource']} stale holders refused by the "
        f"resource, {s['writes_after_takeover_before_claim']} writes after a takeover but before "
        f"the claim, {s['holders_that_saw_their_loss']} holders saw their loss"
    )
    lines.append(f"faults           {json.dumps(s['faults'], sort_keys=True)}")
    lines.append(f"proxy            {json.dumps(s['proxy'], sort_keys=True)}")
    lines.append(f"ambiguous acq.   {json.dumps(s['ambiguous_acquisitions'], sort_keys=True)}")
    lines.append(f"violations       {s['violations']}")
    lines += [f"  {v}" for v in result.violations[:50]]
    if result.harness_errors:
        lines.append("harness errors   " + "; ".join(result.harness_errors))
    return "\n".join(lines)


def recheck(path: Path) -> int:
    """Checks a recorded history again (after a checker change, or for a post-mortem)."""
    if path.is_dir():
        path = path / "history.jsonl"
    events = load([path])
    violations = check(events)
    figures = summarize(events)
    print(json.dumps({k: v for k, v in figures.items() if k != "operations"}, indent=1))
    print(f"violations       {len(violations)}")
    for v in violations[:50]:
        print(f"  {v}")
    return 1 if violations else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/chaos",
        description="A chaos run against real servers and PostgreSQL: its figures, and exit "
        "status 1 on any violation. See docs/safety.md.",
    )
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of workload")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults",
        default=",".join(ALL_FAULTS),
        help=f"comma-separated subset of {','.join(ALL_FAULTS)}, or 'none'",
    )
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--process-threads", type=int, default=2, help="workers per process")
    parser.add_argument("--threads", type=int, default=2, help="worker threads in this process")
    parser.add_argument("--keys", type=int, default=3)
    parser.add_argument("--max-pg-restarts", type=int, default=1_000_000)
    parser.add_argument(
        "--adopt-recovered",
        action="store_true",
        help="guards recover an ambiguous acquisition with with_lock(token=, request_id=) "
        "and keep the lease (default: they release it)",
    )
    parser.add_argument("--out", type=Path, default=None, help="where histories go")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--recheck",
        type=Path,
        default=None,
        metavar="HISTORY",
        help="only run the checker on a history (history.jsonl or a run's --out folder)",
    )
    args = parser.parse_args(argv)
    if args.recheck is not None:
        return recheck(args.recheck)

    faults = () if args.faults == "none" else tuple(f for f in args.faults.split(",") if f)
    admin_url = os.environ.get("VOLCANO_TEST_POSTGRES_URL", DEFAULT_PG_ADMIN_URL)
    if unknown := sorted(set(faults) - set(ALL_FAULTS)):
        parser.error(f"unknown faults {unknown}; choose from {','.join(ALL_FAULTS)}")
    if "pg-restart" in faults and (why_not := pg_restart_available(admin_url)) is not None:
        parser.error(f"the pg-restart fault cannot run here: {why_not}")
    out = args.out or Path(tempfile.mkdtemp(prefix="volcano-chaos-"))
    import psycopg

    names = [f"volcano_chaos_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        result = run(
            RunConfig(
                out_dir=out,
                lock_db_url=_database(admin_url, names[0]),
                resource_pg_url=_database(admin_url, names[1]),
                pg_admin_url=admin_url,
                duration=args.duration,
                seed=args.seed,
                faults=faults,
                replicas=args.replicas,
                processes=args.processes,
                threads_per_process=args.process_threads,
                threads=args.threads,
                keys=args.keys,
                max_pg_restarts=args.max_pg_restarts,
                adopt_recovered=args.adopt_recovered,
            )
        )
    finally:
        if not args.keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                for name in names:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(report(result))
    print(f"histories in {out}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
