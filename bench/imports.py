"""Import time in a fresh interpreter: ``import volcano_sdk`` against its floor
``import httpx, attrs`` (the SDK's two dependencies), median of several interleaved runs."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 9
CODE = "import time; t = time.perf_counter(); import {0}; print(time.perf_counter() - t)"


def _once(modules: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", CODE.format(modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    return float(done.stdout.strip())


def measure() -> dict[str, object]:
    sdk: list[float] = []
    floor: list[float] = []
    for _ in range(RUNS):  # interleaved, so drifting machine load hits both alike
        sdk.append(_once("volcano_sdk"))
        floor.append(_once("httpx, attrs"))
    return {
        "sdk_ms": 1000 * statistics.median(sdk),
        "floor_ms": 1000 * statistics.median(floor),
        "runs": RUNS,
        "top": importtime_top(),
    }


def importtime_top(n: int = 15) -> list[tuple[str, float, float]]:
    """(module, self ms, cumulative ms) of what ``import volcano_sdk`` pulls in beyond the
    floor, from ``-X importtime``, biggest cumulative first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import httpx, attrs; import volcano_sdk"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    lines = done.stderr.splitlines()
    # Everything after the floor's last top-level import belongs to volcano_sdk.
    start = max(i for i, line in enumerate(lines) if re.search(r"\|\s*(httpx|attrs)$", line))
    rows = []
    for line in lines[start + 1 :]:
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and len(m.group(3)) // 2 <= 4:  # deeper rows are noise at this size
            rows.append((m.group(4), int(m.group(1)) / 1000, int(m.group(2)) / 1000))
    rows.sort(key=lambda r: -r[2])
    return rows[:n]
