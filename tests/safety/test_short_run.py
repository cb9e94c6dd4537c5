"""The short chaos run: every fault, a fixed seed, about 90 seconds; fails on any violation.

Select it with ``-m slow`` (or skip it with ``-m "not slow"``). It needs PostgreSQL, restarts it
once when it can (loopback, root, ``pg_ctlcluster``), waiting until it accepts connections
again, and leaves the histories, ``summary.json``
and ``violations.txt`` in its ``tmp_path`` for a post-mortem. Set
``VOLCANO_SAFETY_PG_RESTART=0`` to leave PostgreSQL alone (e.g. while sharing it with other
test runs); the long run (``scripts/chaos``, docs/safety.md) restarts it many times.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.safety._faults import ALL_FAULTS, pg_restart_available
from tests.safety._run import RunConfig, run
from tests.safety.chaos import report

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SEED = 20261129
DURATION = 70.0


@pytest.mark.timeout(300)
def test_short_chaos_run_has_no_violation(
    pg_admin_url: str, new_database: Callable[[str], str], tmp_path: Path
) -> None:
    faults = ALL_FAULTS
    why_not = pg_restart_available(pg_admin_url)
    if os.environ.get("VOLCANO_SAFETY_PG_RESTART", "1") == "0":
        why_not = "VOLCANO_SAFETY_PG_RESTART=0"
    if why_not is not None:
        print(f"pg-restart left out: {why_not}")
        faults = tuple(f for f in ALL_FAULTS if f != "pg-restart")
    result = run(
        RunConfig(
            out_dir=tmp_path,
            lock_db_url=new_database("postgres"),
            resource_pg_url=new_database("postgres"),
            pg_admin_url=pg_admin_url,
            duration=DURATION,
            seed=SEED,
            faults=faults,
            replicas=3,
            processes=2,
            threads_per_process=2,
            threads=2,
            keys=3,
            max_pg_restarts=1,
        )
    )
    text = report(result)
    print(text)
    assert result.violations == [], text
    assert result.harness_errors == [], text
    summary = result.summary
    assert set(summary["faults"]) == set(faults), text  # every chosen fault happened
    assert summary["increments_acknowledged"] >= 100, text
    assert summary["operations"]["acquire"].get("ok", 0) >= 50, text
