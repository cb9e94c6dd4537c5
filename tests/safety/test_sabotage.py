"""The whole pipeline catches a broken system: sabotaged runs must report violations.

The checker's unit tests plant violations in hand-made histories; these runs plant them in the
real system instead, and the same workload, recorder and checker must notice:

- ``forge``: the proxy turns some refused acquisitions into grants that reuse the current
  holder's fence (what a service without a row lock might do). Expected: a reused fence and
  overlapping grants, and the resource cannot tell the two holders apart.
- ``naive-store``: the protected store checks the fence on the write only, without the claim
  before the read (DESIGN.md's counter-example). Under force-releases the old holder's write
  lands between the new holder's read and write. Expected: lost updates.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.safety._run import RunConfig, run
from tests.safety.chaos import report

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _run(tmp_path: Path, new_database: Callable[[str], str], **kw: object) -> set[str]:
    result = run(
        RunConfig(
            out_dir=tmp_path,
            lock_db_url=new_database("postgres"),
            resource_pg_url=new_database("postgres"),
            replicas=2,
            processes=1,
            threads_per_process=2,
            threads=2,
            keys=2,
            tail=3.0,
            **kw,  # type: ignore[arg-type]
        )
    )
    print(report(result))
    assert result.harness_errors == []
    return {v.kind for v in result.violations}


@pytest.mark.timeout(120)
def test_forged_grants_are_caught(tmp_path: Path, new_database: Callable[[str], str]) -> None:
    kinds = _run(tmp_path, new_database, duration=15.0, seed=3, faults=(), sabotage=("forge",))
    assert {"fence-reused", "grant-overlap"} <= kinds


@pytest.mark.timeout(120)
def test_write_only_fencing_loses_updates(
    tmp_path: Path, new_database: Callable[[str], str]
) -> None:
    kinds = _run(
        tmp_path,
        new_database,
        duration=20.0,
        seed=4,
        faults=("force",),
        quiet=(0.2, 0.8),
        sabotage=("naive-store",),
        reckless=1.0,
        work=1.0,
    )
    assert "lost-update" in kinds
