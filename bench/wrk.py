"""Server capacity with wrk (a C load generator), so the client is not the limit."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

from ._util import Result

SCRIPT = Path(__file__).with_name("cycle.lua")
GROUP = "server capacity (wrk)"
CONNECTIONS = 16


def available() -> bool:
    return shutil.which("wrk") is not None


def _ms(text: str | None) -> float | None:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text or "")
    if m is None:
        return None
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[m.group(2)]


def run(name: str, url: str, anon: str, service: str, seconds: float) -> Result:
    if not available():
        return Result(name, GROUP, skipped="wrk not installed (apt-get install -y wrk)")
    nonce = str(random.randrange(1, 2**31))
    args = [
        "wrk", f"-t{CONNECTIONS}", f"-c{CONNECTIONS}", f"-d{seconds:.0f}s", "--latency",
        "-s", str(SCRIPT), url, "--", anon, service, nonce,
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 30, check=False)
    out = done.stdout
    m = re.search(r"(\d+) requests in ([\d.]+)(s|m)", out)
    if done.returncode != 0 or m is None:
        return Result(name, GROUP, skipped=f"wrk failed: {done.stderr.strip()[:200]}")
    requests = int(m.group(1))
    elapsed = float(m.group(2)) * (60 if m.group(3) == "m" else 1)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = int(bad.group(1)) if bad else 0
    p50 = re.search(r"50%\s+(\S+)", out)
    p99 = re.search(r"99%\s+(\S+)", out)
    result = Result(
        name,
        GROUP,
        cycles=requests // 2,
        seconds=elapsed,
        p50_ms=_ms(p50.group(1) if p50 else None),
        p99_ms=_ms(p99.group(1) if p99 else None),
        errors=errors,
        note=f"{requests / elapsed:,.0f} requests/s; latency per request",
    )
    result.extra["requests_per_s"] = requests / elapsed
    return result
