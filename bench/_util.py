"""Timed loops with latency samples, statistics, and small process helpers."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

# Every loop is bounded twice: by time and by count.
MAX_CYCLES = 200_000


@dataclass
class Result:
    """One measured setup: cycles per second and per-cycle latency percentiles (ms)."""

    name: str
    group: str
    cycles: int = 0
    seconds: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: int = 0
    note: str = ""
    skipped: str | None = None  # why it did not run
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        if self.skipped is not None or self.seconds <= 0:
            return None
        return self.cycles / self.seconds


def percentiles(samples: list[float]) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return p50 * 1000, p99 * 1000


def run_threads(
    name: str,
    group: str,
    make_cycle: Callable[[int], Callable[[], None]],
    threads: int,
    seconds: float,
    warmup: float = 0.3,
) -> Result:
    """``make_cycle(i)`` builds worker i's cycle function; all workers run for ``seconds``."""
    cycles = [make_cycle(i) for i in range(threads)]
    samples: list[list[float]] = [[] for _ in range(threads)]
    errors = [0] * threads
    start_gate = threading.Barrier(threads + 1)
    state = {"measure_from": 0.0, "stop_at": 0.0}

    def worker(i: int) -> None:
        cycle, mine = cycles[i], samples[i]
        start_gate.wait()
        count = 0
        while count < MAX_CYCLES:
            t0 = time.perf_counter()
            if t0 >= state["stop_at"]:
                break
            try:
                cycle()
            except Exception:
                errors[i] += 1
                time.sleep(0.01)  # a dead server must not turn into a busy loop
                continue
            if t0 >= state["measure_from"]:
                mine.append(time.perf_counter() - t0)
            count += 1

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    now = time.perf_counter()
    state["measure_from"] = now + warmup
    state["stop_at"] = now + warmup + seconds
    start_gate.wait()
    for t in pool:
        t.join(seconds + warmup + 30)
    return _result(name, group, samples, errors, state)


async def arun_tasks(
    name: str,
    group: str,
    make_cycle: Callable[[int], Callable[[], Awaitable[None]]],
    tasks: int,
    seconds: float,
    warmup: float = 0.3,
) -> Result:
    """The async twin of ``run_threads``: ``tasks`` coroutines on the running loop."""
    cycles = [make_cycle(i) for i in range(tasks)]
    samples: list[list[float]] = [[] for _ in range(tasks)]
    errors = [0] * tasks
    now = time.perf_counter()
    state = {"measure_from": now + warmup, "stop_at": now + warmup + seconds}

    async def worker(i: int) -> None:
        cycle, mine = cycles[i], samples[i]
        count = 0
        while count < MAX_CYCLES:
            t0 = time.perf_counter()
            if t0 >= state["stop_at"]:
                break
            try:
                await cycle()
            except Exception:
                errors[i] += 1
                await asyncio.sleep(0.01)
                continue
            if t0 >= state["measure_from"]:
                mine.append(time.perf_counter() - t0)
            count += 1

    await asyncio.wait_for(
        asyncio.gather(*(worker(i) for i in range(tasks))), seconds + warmup + 30
    )
    return _result(name, group, samples, errors, state)


def _result(
    name: str,
    group: str,
    samples: list[list[float]],
    errors: list[int],
    state: dict[str, float],
) -> Result:
    flat = [s for per in samples for s in per]
    p50, p99 = percentiles(flat)
    # Cycles that started inside the window, over the window: a cycle still running at the
    # end is counted, which biases by at most one cycle per worker.
    window = state["stop_at"] - state["measure_from"]
    return Result(name, group, len(flat), window, p50, p99, sum(errors))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def rss_bytes(pid: int | None = None) -> int:
    path = f"/proc/{pid or os.getpid()}/status"
    with open(path) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass
class Setup:
    """One single-threaded cycle, ready to run: built by a maker, closed after the run."""

    key: str
    name: str
    group: str
    cycle: Callable[[], None]
    close: Callable[[], None] = lambda: None
    note: str = ""


def run_interleaved(
    setups: list[Setup], seconds_each: float, slice_s: float = 0.25, warmup: float = 0.3
) -> dict[str, Result]:
    """Runs every setup on this thread in turns of ``slice_s`` until each has had
    ``seconds_each``: a burst of load from elsewhere then hits all of them alike, which keeps
    their ratios steadier than back-to-back runs do."""
    samples: dict[str, list[float]] = {s.key: [] for s in setups}
    spent = dict.fromkeys(samples, 0.0)
    errors = dict.fromkeys(samples, 0)
    for s in setups:  # warm connections and caches, unmeasured
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            try:
                s.cycle()
            except Exception:
                errors[s.key] += 1
                break
    while any(spent[s.key] < seconds_each for s in setups):
        for s in setups:
            if spent[s.key] >= seconds_each or len(samples[s.key]) >= MAX_CYCLES:
                spent[s.key] = max(spent[s.key], seconds_each)
                continue
            mine, cycle = samples[s.key], s.cycle
            start = time.perf_counter()
            end = start + min(slice_s, seconds_each - spent[s.key])
            t0 = start
            while t0 < end:
                try:
                    cycle()
                    t1 = time.perf_counter()
                    mine.append(t1 - t0)
                except Exception:
                    errors[s.key] += 1
                    time.sleep(0.01)  # a dead peer must not turn into a busy loop
                    t1 = time.perf_counter()
                t0 = t1
            spent[s.key] += t0 - start
    out = {}
    for s in setups:
        p50, p99 = percentiles(samples[s.key])
        n = len(samples[s.key])
        out[s.key] = Result(s.name, s.group, n, spent[s.key], p50, p99, errors[s.key], s.note)
    return out
