"""The workload: holders of Volcano locks doing fenced read-modify-write on a counter.

A worker loops until its stop time (and at most ``max_rounds`` times): it picks a key, takes
the lock (``with_lock`` of the sync or the async client, or raw ``acquire``/``renew``/
``release``), and does one to three
increments of that key's counter (``_resource.Store``): claim and read, work a little, then
verify and write. Before each step it looks at its ownership (``guard.lost``, or its own local
deadline for raw holders) and records what it saw; a *reckless* worker writes anyway, so that
the resource's fence is the only thing between a stale holder and the data.

An acquisition whose outcome is unknown (``AcquireOutcomeUnknownError``) is recovered with the
error's token and request id; a raw holder then uses the lease it recovered; a guard holder
releases it, or with ``adopt_recovered`` enters ``with_lock(token=..., request_id=...)`` and
keeps it (the documented recovery, which needs the SDK to count the recovered lease's local
deadline from the original grant).

Run as ``python -m tests.safety._workload CONFIG.json NAME`` for a worker *process* (the
fault harness pauses those with SIGSTOP); ``run_threads`` runs the same workers as threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import sys
import threading
import time
import uuid
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.safety._history import AsyncRecordingTransport, Recorder, RecordingTransport
from tests.safety._resource import Store, WriteUnknown
from volcano_sdk import (
    AcquireOutcomeUnknownError,
    AsyncLockGuard,
    AsyncVolcanoClient,
    ConflictError,
    LockGuard,
    LockLease,
    LockLostError,
    StaleFenceError,
    VolcanoClient,
    VolcanoError,
)

__all__ = ["WorkerConfig", "run_threads", "worker"]

# Failed renewals and releases are the point of the run; the history has them all.
logging.getLogger("volcano_sdk").setLevel(logging.ERROR)


@dataclass
class WorkerConfig:
    api_url: str
    anon_key: str
    service_key: str
    resources: dict[str, list[str]]  # lock key -> [backend, target]
    history_dir: str
    stop_at: float  # time.monotonic() (one clock for every process of the machine)
    seed: int
    ttl: int = 5
    wait: float = 2.0
    max_rounds: int = 10_000
    threads: int = 2
    modes: list[str] = field(default_factory=lambda: ["guard", "raw", "async-guard"])
    first_index: int = 0  # workers of all processes get consecutive indexes, hence modes
    reckless: float = 0.3  # chance that a round skips the ownership check before writing
    timeout: float = 3.0
    work: float = 0.15  # at most this long between the read and the write
    naive_store: bool = False  # sabotage: see _resource.Store
    # Guards recover an ambiguous acquisition by entering with_lock again with the error's
    # token and request id, and keep the lease (needs the SDK's recovered-deadline fix).
    adopt_recovered: bool = False

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> WorkerConfig:
        return cls(**json.loads(path.read_text()))


@dataclass
class _Held:
    """A raw holder's lease and its own local deadline (monotonic)."""

    lease: LockLease
    deadline: float


class Worker:
    def __init__(self, cfg: WorkerConfig, name: str, mode: str, seed: int) -> None:
        self.cfg = cfg
        self.name = name
        self.mode = mode
        self.rng = random.Random(seed)
        self.rec = Recorder(Path(cfg.history_dir) / f"{name}.jsonl", name)
        self.client = VolcanoClient(
            cfg.anon_key,
            cfg.service_key,
            cfg.api_url,
            timeout=httpx.Timeout(cfg.timeout, connect=1.0),
            transport=RecordingTransport(self.rec),
        )
        self.recovering = 0  # attempts of the guard recovery under way
        self.stores = {
            key: Store(b, t, naive=cfg.naive_store) for key, (b, t) in cfg.resources.items()
        }

    # -- recording helpers --------------------------------------------------------------------

    def observe(self, key: str, lease: LockLease, lost: bool, t0: float, deadline: float) -> None:
        self.rec.record(
            "info", "observe", key=key, token=lease.token, fence=lease.fencing_token,
            lost=lost, t0=t0, deadline=deadline, ttl=lease.ttl,
            expires=lease.expires_at.isoformat(), mode=self.mode,
        )  # fmt: skip

    def guard_ok(self, key: str, guard: LockGuard | AsyncLockGuard) -> bool:
        t0 = time.monotonic()
        lost = guard.lost  # read before the lease: a renewal in between only moves it later
        lease = guard.lease
        self.observe(key, lease, lost, t0, lease.local_deadline)
        return not lost

    # -- the fenced increment -------------------------------------------------------------------

    def increment(self, key: str, lease: LockLease, still_ours: Any) -> bool:
        """Claim, read, work, write. False when the holder should stop."""
        store, fence, token = self.stores[key], lease.fencing_token, lease.token
        op = self.rec.new_op()
        self.rec.record("invoke", "claim", op, key=key, fence=fence, token=token)
        try:
            value = store.claim(key, fence, op)
        except StaleFenceError:
            self.rec.record("fail", "claim", op, key=key, fence=fence, token=token)
            return False
        except Exception as exc:
            self.rec.record("unknown", "claim", op, key=key, fence=fence, error=type(exc).__name__)
            time.sleep(0.2)
            return False
        self.rec.record("ok", "claim", op, key=key, fence=fence, token=token, value=value)
        time.sleep(self.rng.uniform(0.0, self.cfg.work))  # the work between the read and the write
        if self.rng.random() >= self.cfg.reckless and not still_ours():
            return False
        op = self.rec.new_op()
        fields = {"key": key, "fence": fence, "token": token, "old": value, "new": value + 1}
        self.rec.record("invoke", "write", op, **fields)
        try:
            store.write(key, fence, op, value, value + 1)
        except StaleFenceError:
            self.rec.record("fail", "write", op, **fields, why="stale")
            return False
        except WriteUnknown as exc:
            self.rec.record("unknown", "write", op, **fields, error=str(exc)[:80])
            return False
        except Exception as exc:
            self.rec.record("fail", "write", op, **fields, error=type(exc).__name__)
            time.sleep(0.2)
            return False
        self.rec.record("ok", "write", op, **fields)
        return True

    # -- ambiguous acquisitions ----------------------------------------------------------------

    def recover(self, key: str, err: AcquireOutcomeUnknownError) -> LockLease | None:
        """Learns the outcome with the same token and request id; the lease if it was ours."""
        for attempt in range(4):
            time.sleep(0.2 * (attempt + 1))
            try:
                lease = self.client.locks.acquire(
                    key, self.cfg.ttl, token=err.token, request_id=err.request_id
                )
            except AcquireOutcomeUnknownError:
                continue
            except ConflictError:
                self.rec.record("info", "recover", key=key, token=err.token, outcome="refused")
                return None
            except VolcanoError:
                continue
            self.rec.record("info", "recover", key=key, token=err.token, outcome="granted")
            return lease
        self.rec.record("info", "recover", key=key, token=err.token, outcome="unresolved")
        return None

    # -- the two kinds of holder ---------------------------------------------------------------

    def round_guard(self, key: str, unknown: AcquireOutcomeUnknownError | None = None) -> None:
        rounds = self.rng.randint(1, 3)
        token = None if unknown is None else unknown.token
        rid = None if unknown is None else unknown.request_id
        wait = self.cfg.wait if unknown is None else None
        try:
            with self.client.locks.with_lock(
                key, self.cfg.ttl, token=token, request_id=rid, wait=wait
            ) as guard:
                self.recovered(key, unknown, "granted")
                self.settle()
                for _ in range(rounds):
                    if not self.guard_ok(key, guard):
                        break
                    if not self.increment(key, guard.lease, lambda: self.guard_ok(key, guard)):
                        break
                    time.sleep(self.rng.uniform(0.0, 0.3))
                self.guard_ok(key, guard)
        except LockLostError as exc:
            self.rec.record("info", "guard-exit", key=key, lost=exc.reason.value)
        except AcquireOutcomeUnknownError as err:
            if self.cfg.adopt_recovered:
                if unknown is None or self.recovering < 3:
                    self.recovering = 1 if unknown is None else self.recovering + 1
                    time.sleep(0.2 * self.recovering)
                    self.round_guard(key, err)
                else:
                    self.recovered(key, unknown, "unresolved")
                return
            lease = self.recover(key, err)
            if lease is not None:
                self.release(key, lease)
        except ConflictError:
            self.recovered(key, unknown, "refused")  # or still held by another after `wait`
        except VolcanoError:
            time.sleep(0.2)

    def recovered(self, key: str, unknown: AcquireOutcomeUnknownError | None, outcome: str) -> None:
        """Records how a guard's recovery of an ambiguous acquisition ended (if it was one)."""
        if unknown is not None:
            self.rec.record("info", "recover", key=key, token=unknown.token, outcome=outcome)

    def round_raw(self, key: str) -> None:
        ttl, locks = self.cfg.ttl, self.client.locks
        token, rid = str(uuid.uuid4()), str(uuid.uuid4())
        started = time.monotonic()  # before the first try: the lease cannot outlive this + ttl
        try:
            lease: LockLease | None = locks.acquire(
                key, ttl, token=token, request_id=rid, wait=self.cfg.wait
            )
        except AcquireOutcomeUnknownError as err:
            lease = self.recover(key, err)
        except VolcanoError:
            return
        if lease is None:
            return
        held = _Held(lease, started + ttl)
        self.settle()

        def still_ours() -> bool:
            t0 = time.monotonic()
            lost = t0 >= held.deadline
            self.observe(key, held.lease, lost, t0, held.deadline)
            return not lost

        for i in range(self.rng.randint(1, 3)):
            if not still_ours() or not self.increment(key, held.lease, still_ours):
                break
            if i == 0 or self.rng.random() < 0.5:
                renew_started = time.monotonic()
                try:
                    held.lease = locks.renew(key, held.lease, ttl)
                    held.deadline = renew_started + ttl
                except ConflictError:
                    break  # superseded or expired: stop
                except VolcanoError:
                    pass  # unanswered: the old deadline still bounds us
        self.release(key, held.lease)

    def settle(self) -> None:
        """Sometimes a new holder takes a moment before it claims: a stale holder that does not
        know yet (force-released, say) may still write then, legitimately."""
        if self.rng.random() < 0.3:
            time.sleep(self.rng.uniform(0.0, 0.4))

    def release(self, key: str, lease: LockLease) -> None:
        with contextlib.suppress(VolcanoError):  # the lease ends at its TTL anyway
            self.client.locks.release(key, lease)

    async def round_async_guard(
        self, key: str, unknown: AcquireOutcomeUnknownError | None = None
    ) -> None:
        """``round_guard`` with ``AsyncVolcanoClient``: the async guard renews in a task while
        the blocking database work runs in a thread."""
        rounds = self.rng.randint(1, 3)
        token = None if unknown is None else unknown.token
        rid = None if unknown is None else unknown.request_id
        wait = self.cfg.wait if unknown is None else None
        try:
            async with self.aclient.locks.with_lock(
                key, self.cfg.ttl, token=token, request_id=rid, wait=wait
            ) as guard:
                self.recovered(key, unknown, "granted")
                await asyncio.to_thread(self.settle)
                for _ in range(rounds):
                    if not self.guard_ok(key, guard):
                        break
                    ok = await asyncio.to_thread(
                        self.increment, key, guard.lease, lambda: self.guard_ok(key, guard)
                    )
                    if not ok:
                        break
                    await asyncio.sleep(self.rng.uniform(0.0, 0.3))
                self.guard_ok(key, guard)
        except LockLostError as exc:
            self.rec.record("info", "guard-exit", key=key, lost=exc.reason.value)
        except AcquireOutcomeUnknownError as err:
            if self.cfg.adopt_recovered:
                if unknown is None or self.recovering < 3:
                    self.recovering = 1 if unknown is None else self.recovering + 1
                    await asyncio.sleep(0.2 * self.recovering)
                    await self.round_async_guard(key, err)
                else:
                    self.recovered(key, unknown, "unresolved")
                return
            lease = await asyncio.to_thread(self.recover, key, err)
            if lease is not None:
                await asyncio.to_thread(self.release, key, lease)
        except ConflictError:
            self.recovered(key, unknown, "refused")
        except VolcanoError:
            await asyncio.sleep(0.2)

    async def run_async(self, keys: list[str]) -> None:
        self.aclient = AsyncVolcanoClient(
            self.cfg.anon_key,
            self.cfg.service_key,
            self.cfg.api_url,
            timeout=httpx.Timeout(self.cfg.timeout, connect=1.0),
            transport=AsyncRecordingTransport(self.rec),
        )
        try:
            for _ in range(self.cfg.max_rounds):
                if time.monotonic() >= self.cfg.stop_at:
                    break
                await self.round_async_guard(self.rng.choice(keys))
                await asyncio.sleep(self.rng.uniform(0.0, 0.2))
        finally:
            await self.aclient.close()

    def run(self) -> None:
        keys = sorted(self.cfg.resources)
        try:
            if self.mode == "async-guard":
                asyncio.run(self.run_async(keys))
                return
            for _ in range(self.cfg.max_rounds):
                if time.monotonic() >= self.cfg.stop_at:
                    break
                key = self.rng.choice(keys)
                if self.mode == "guard":
                    self.round_guard(key)
                else:
                    self.round_raw(key)
                time.sleep(self.rng.uniform(0.0, 0.2))
        finally:
            self.client.close()
            for store in self.stores.values():
                store.close()
            self.rec.close()


def worker(cfg: WorkerConfig, name: str, index: int) -> Worker:
    mode = cfg.modes[index % len(cfg.modes)]
    return Worker(cfg, name, mode, seed=cfg.seed * 100_003 + zlib.crc32(name.encode()))


def run_threads(cfg: WorkerConfig, prefix: str) -> list[threading.Thread]:
    """Starts ``cfg.threads`` workers as threads of this process; returns them, started."""
    threads = []
    for i in range(cfg.threads):
        w = worker(cfg, f"{prefix}t{i}", cfg.first_index + i)
        t = threading.Thread(target=w.run, name=w.name, daemon=True)
        t.start()
        threads.append(t)
    return threads


def main(argv: list[str]) -> int:
    cfg = WorkerConfig.load(Path(argv[0]))
    prefix = argv[1]
    for t in run_threads(cfg, prefix):
        t.join(max(1.0, cfg.stop_at - time.monotonic() + 60))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
