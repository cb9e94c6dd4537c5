"""Guard scaling, in a child process of its own so threads and memory are its alone.

    python -m bench.guards URL ANON SERVICE N TTL HOLD   # prints one JSON object

N ``with_lock`` guards on N keys are entered from a pool of 16 bench threads (the
acquisitions), which is then shut down; the guards are held for HOLD seconds while the SDK
renews them, and finally exited (released) from the pool again.  A renewal is *late* when it
came back with less than TTL/3 left before the old lease's local deadline (it is due with 2/3
TTL left, so half of its safety margin was used); a guard still waiting for a renewal that
overdue at the end of the hold counts as late too.  *Lost* is a guard whose ``lost`` turned
True.  Renewal threads are the SDK's threads (named ``volcano-*``), sampled during the hold.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

from volcano_sdk import LockEvent, LockEventKind, LockGuard, VolcanoClient

from ._util import rss_bytes

ACQUIRERS = 16
TRACEMALLOC_MAX_N = 1000  # tracemalloc slows every allocation; above this RSS alone is used


def _sdk_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("volcano")]


def run(url: str, anon: str, service: str, n: int, ttl: int, hold: float) -> dict[str, object]:
    margins: list[float] = []
    lost_events: list[str] = []

    def on_event(event: LockEvent) -> None:
        if event.kind is LockEventKind.RENEWED and event.margin is not None:
            margins.append(event.margin)
        elif event.kind is LockEventKind.LOST:
            lost_events.append(str(event.reason))

    client = VolcanoClient(anon, service, url, on_event=on_event)
    # Warm the connection pool and the import caches so they do not count as guard memory.
    client.locks.release("warm", client.locks.acquire("warm", ttl))
    threads_before = threading.active_count()
    traced = n <= TRACEMALLOC_MAX_N
    if traced:
        tracemalloc.start()
    rss0 = rss_bytes()
    mem0 = tracemalloc.get_traced_memory()[0] if traced else 0

    def enter(i: int) -> LockGuard:
        guard = client.locks.with_lock(f"guard-{n}-{i}", ttl)
        guard.__enter__()
        return guard

    t0 = time.monotonic()
    with ThreadPoolExecutor(ACQUIRERS, thread_name_prefix="bench-acquire") as pool:
        guards = list(pool.map(enter, range(n)))
    entered = time.monotonic()
    mem1 = tracemalloc.get_traced_memory()[0] if traced else 0
    if traced:
        tracemalloc.stop()
    rss1 = rss_bytes()

    # The hold: sample the SDK's threads; leave the renewals to the SDK.
    max_sdk_threads, max_threads, names = 0, 0, set()
    renewals_before = len(margins)
    end = entered + hold
    while (now := time.monotonic()) < end:
        sdk = _sdk_threads()
        names.update(name.rsplit("_", 1)[0] for name in sdk)
        max_sdk_threads = max(max_sdk_threads, len(sdk))
        max_threads = max(max_threads, threading.active_count())
        time.sleep(min(0.25, end - now))
    now = time.monotonic()
    renewals_in_hold = len(margins) - renewals_before
    overdue = sum(
        1 for g in guards if not g.lost and now > g.lease.local_deadline - ttl / 3
    )  # due at deadline - 2/3 TTL and still not renewed a third of the TTL later
    lost = sum(1 for g in guards if g.lost)
    snapshot = list(margins)

    def leave(guard: LockGuard) -> bool:
        try:
            guard.__exit__(None, None, None)
            return True
        except Exception:
            return False

    t1 = time.monotonic()
    with ThreadPoolExecutor(ACQUIRERS, thread_name_prefix="bench-release") as pool:
        clean_exits = sum(pool.map(leave, guards))
    released = time.monotonic()
    client.close()

    late = sum(1 for m in snapshot if m < ttl / 3)
    return {
        "n": n,
        "ttl": ttl,
        "hold_s": hold,
        "acquire_s": entered - t0,
        "release_s": released - t1,
        "acquire_rate": n / (entered - t0),
        "renewals": len(snapshot),
        "renewals_in_hold": renewals_in_hold,
        "renewal_rate_hold": renewals_in_hold / hold,
        "renewal_demand": n / (ttl / 3),  # renewals/s the schedule asks for in steady state
        "late": late + overdue,
        "late_done": late,
        "overdue_at_end": overdue,
        "lost": lost,
        "lost_events": len(lost_events),
        "clean_exits": clean_exits,
        "min_margin_s": min(snapshot) if snapshot else None,
        "p50_margin_s": statistics.median(snapshot) if snapshot else None,
        "sdk_threads": max_sdk_threads,
        "sdk_thread_names": sorted(names),
        "threads_before": threads_before,
        "max_threads_in_hold": max_threads,
        "rss_per_guard": (rss1 - rss0) / n,
        "traced_per_guard": (mem1 - mem0) / n if traced else None,
    }


if __name__ == "__main__":
    url, anon, service, n, ttl, hold = sys.argv[1:7]
    print(json.dumps(run(url, anon, service, int(n), int(ttl), float(hold))))
