"""SQLite backend: the embedded default.

Durability: WAL with `synchronous=FULL`, so a commit is fsynced before the answer leaves; no
granted lease and no fencing counter is lost when the process or the machine crashes.  (`NORMAL`
would be ~5x faster here but may lose the last commits on power loss, which could hand out a
fence twice.)

Concurrency: every write transaction starts with `BEGIN IMMEDIATE`, which takes SQLite's single
write lock up front, so several worker processes on one file serialise instead of failing
half-way with SQLITE_BUSY; `busy_timeout` bounds the wait.  Within a process all calls run on one
dedicated thread with one connection, which keeps blocking I/O off the event loop.

Group commit: lock mutations that arrive while the thread is busy are applied together in one
transaction, each inside its own savepoint (so one failing operation does not undo the others),
and answered only after the COMMIT, i.e. after the fsync.  Every answer is as durable as with one
transaction per request, but one fsync serves a whole batch.

Clock: SQLite has no server clock; "now" is the machine's clock, read after the write lock is
taken.  Every process sharing the file runs on the same machine, hence on the same clock.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from . import _logic
from ._base import (
    IDEMPOTENCY_RETENTION,
    LEASE_GRACE,
    KeyLookup,
    LockRow,
    LockState,
    Mutation,
    Outcome,
    ProjectExists,
    ProjectInfo,
    ProjectNotFound,
    SchemaTooNew,
    StorageUnavailable,
    Store,
    SweepResult,
)
from ._schema import LATEST_VERSION, SQLITE_MIGRATIONS, too_new_message

__all__ = ["SQLiteStore"]

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
_ROW_AND_SEEN = (
    "SELECT l.last_fence, l.token, l.token_text, l.expires_at, i.fingerprint, i.status, i.body"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN locks AS l ON l.project_id = ? AND l.key = ?"
    " LEFT JOIN idempotency AS i ON i.project_id = ? AND i.request_id = ?"
)
# Bounds one transaction's length, and so how long the write lock is held for other processes.
_MAX_BATCH = 64


def _settle(future: asyncio.Future[Outcome], ok: bool, value: object) -> None:
    if future.done():  # the request was cancelled (client gone); the change stands
        return
    if ok:
        future.set_result(value)  # type: ignore[arg-type]
    else:
        assert isinstance(value, BaseException)
        future.set_exception(value)


def _now_us() -> int:
    return time.time_ns() // 1000


def _to_dt(us: int | None) -> datetime | None:
    if us is None:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def _to_us(value: datetime | None) -> int | None:
    if value is None:
        return None
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class SQLiteStore(Store):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        # Mutations waiting for the store thread, and whether a drain is scheduled on it.
        self._pending: list[tuple[Callable[[sqlite3.Connection], Outcome], asyncio.Future[Outcome]]]
        self._pending = []
        self._pending_lock = threading.Lock()
        self._draining = False

    # -- plumbing --------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None or self._conn is None:
            raise StorageUnavailable("the store is not open")
        conn = self._conn

        def call() -> T:
            try:
                return fn(conn)
            except sqlite3.OperationalError as exc:
                # "database is locked" past busy_timeout, disk I/O errors, a vanished file:
                # nothing was committed, and trying again later may work.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StorageUnavailable(f"SQLite: {exc}") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _write_batched(self, fn: Callable[[sqlite3.Connection], Outcome]) -> Outcome:
        """Queue a mutation for the next group commit and wait for its durable answer."""
        executor = self._executor
        if executor is None or self._conn is None:
            raise StorageUnavailable("the store is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        with self._pending_lock:
            self._pending.append((fn, future))
            schedule, self._draining = not self._draining, True
        if schedule:
            executor.submit(self._drain, loop)
        return await future

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the store thread: commit queued mutations in batches until none is left."""
        try:
            while True:
                with self._pending_lock:
                    batch = self._pending[:_MAX_BATCH]
                    del self._pending[:_MAX_BATCH]
                    if not batch:
                        self._draining = False
                        return
                for future, ok, value in self._commit_batch(batch):
                    loop.call_soon_threadsafe(_settle, future, ok, value)
        except BaseException:
            # Never leave the flag set with nobody draining: the next write schedules anew.
            with self._pending_lock:
                self._draining = False
            raise

    def _commit_batch(
        self,
        batch: list[tuple[Callable[[sqlite3.Connection], Outcome], asyncio.Future[Outcome]]],
    ) -> list[tuple[asyncio.Future[Outcome], bool, object]]:
        conn = self._conn
        if conn is None:
            closed = StorageUnavailable("the store is not open")
            return [(future, False, closed) for _, future in batch]
        results: list[tuple[asyncio.Future[Outcome], bool, object]] = []
        # A batch of one needs no savepoint: if it fails, the whole transaction is rolled back.
        isolate = len(batch) > 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, future in batch:
                if not isolate:
                    results.append((future, True, fn(conn)))
                    continue
                conn.execute("SAVEPOINT op")
                try:
                    results.append((future, True, fn(conn)))
                except sqlite3.OperationalError:
                    raise  # the database itself failed: the whole batch fails below
                except Exception as exc:  # a bug in one operation: undo it alone
                    conn.execute("ROLLBACK TO op")
                    results.append((future, False, exc))
                conn.execute("RELEASE op")
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                exc = StorageUnavailable(f"SQLite: {exc}")
            return [(future, False, exc) for _, future in batch]
        return results

    @staticmethod
    def _write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn.execute("BEGIN IMMEDIATE")
        result = fn(conn)
        conn.execute("COMMIT")
        return result

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            check_same_thread=False,  # used only from the store's single thread
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self, *, schema_version: int | None = None) -> None:
        if self._conn is not None:
            return
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="volcano-sqlite")
        loop = asyncio.get_running_loop()
        try:
            try:
                self._conn = await loop.run_in_executor(self._executor, self._connect)
            except (sqlite3.Error, OSError) as exc:  # unwritable folder, not a database, ...
                raise StorageUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc
            await self._run(lambda c: self._migrate(c, schema_version or LATEST_VERSION))
        except BaseException:
            await self.close()
            raise

    @classmethod
    def _migrate(cls, conn: sqlite3.Connection, target: int) -> None:
        def step(c: sqlite3.Connection) -> None:
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
            )
            row = c.execute("SELECT version FROM schema_version").fetchone()
            current = row[0] if row else 0
            if current > LATEST_VERSION:
                raise SchemaTooNew(too_new_message(current))
            for version in range(current + 1, target + 1):
                for statement in SQLITE_MIGRATIONS[version]:
                    c.execute(statement)
            if target > current:
                c.execute(
                    "INSERT INTO schema_version (id, version) VALUES (1, ?) "
                    "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                    (target,),
                )

        # One transaction: a crash half-way leaves the old version, not a half-built schema.
        cls._write(conn, step)

    async def close(self) -> None:
        conn, executor = self._conn, self._executor
        self._conn = self._executor = None
        if executor is not None:
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(executor, conn.close)
            executor.shutdown(wait=True)

    async def ping(self) -> None:
        await self._run(lambda c: c.execute("SELECT 1").fetchone())

    async def schema_version(self) -> int:
        row = await self._run(lambda c: c.execute("SELECT version FROM schema_version").fetchone())
        return int(row[0]) if row else 0

    # -- lock operations -------------------------------------------------------------------

    async def lookup_keys(self, anon_hash: str, service_hash: str | None) -> KeyLookup:
        def q(c: sqlite3.Connection) -> KeyLookup:
            anon = c.execute(
                "SELECT id, anon_key_hash FROM projects WHERE anon_key_hash = ?", (anon_hash,)
            ).fetchone()
            service = None
            if service_hash is not None:
                service = c.execute(
                    "SELECT project_id, key_hash FROM service_keys "
                    "WHERE key_hash = ? AND revoked_at IS NULL",
                    (service_hash,),
                ).fetchone()
            return KeyLookup(
                anon[0] if anon else None,
                anon[1] if anon else None,
                service[0] if service else None,
                service[1] if service else None,
            )

        return await self._run(q)

    @staticmethod
    def _row(c: sqlite3.Connection, project_id: int, key: str) -> LockRow | None:
        r = c.execute(
            "SELECT last_fence, token, token_text, expires_at FROM locks "
            "WHERE project_id = ? AND key = ?",
            (project_id, key),
        ).fetchone()
        return None if r is None else LockRow(r[0], r[1], r[2], _to_dt(r[3]))

    async def get_lock(self, project_id: int, key: str) -> LockState:
        def q(c: sqlite3.Connection) -> LockState:
            row = self._row(c, project_id, key)
            now = _to_dt(_now_us())
            assert now is not None
            return _logic.state_of(row, now)

        return await self._run(q)

    async def list_locks(
        self, project_id: int, *, prefix: str, after: str, limit: int
    ) -> list[tuple[str, LockState]]:
        def q(c: sqlite3.Connection) -> list[tuple[str, LockState]]:
            now = _now_us()
            # TEXT compares with BINARY collation: bytewise, the order the contract promises.
            rows = c.execute(
                "SELECT key, last_fence, expires_at FROM locks"
                " WHERE project_id = ? AND key > ? AND substr(key, 1, ?) = ?"
                " AND token IS NOT NULL AND expires_at > ? ORDER BY key LIMIT ?",
                (project_id, after, len(prefix), prefix, now, limit),
            ).fetchall()
            return [(r[0], LockState(True, _to_dt(r[2]), r[1])) for r in rows]

        return await self._run(q)

    async def mutate(self, mutation: Mutation) -> Outcome:
        m = mutation

        def tx(c: sqlite3.Connection) -> Outcome:
            # The key's row and the request id's record in one query (the write lock is ours).
            r = c.execute(_ROW_AND_SEEN, (m.project_id, m.key, m.project_id, m.dedup_id)).fetchone()
            now_us = _now_us()
            now = _to_dt(now_us)
            assert now is not None
            if r[4] is not None:
                return _logic.replay(m, r[4], r[5], r[6], now)
            row = None if r[0] is None else LockRow(r[0], r[1], r[2], _to_dt(r[3]))
            decision = _logic.decide(m, row, now)
            w = decision.write
            if w is not None:
                c.execute(
                    "INSERT INTO locks (project_id, key, last_fence, token, token_text, expires_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (project_id, key) DO UPDATE SET"
                    " last_fence = excluded.last_fence, token = excluded.token,"
                    " token_text = excluded.token_text, expires_at = excluded.expires_at",
                    (
                        m.project_id,
                        m.key,
                        w.last_fence,
                        w.token,
                        w.token_text,
                        _to_us(w.expires_at),
                    ),
                )
            out = decision.outcome
            if m.dedup_id is not None:
                c.execute(
                    "INSERT INTO idempotency"
                    " (project_id, request_id, fingerprint, status, body, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        m.project_id,
                        m.dedup_id,
                        m.fingerprint,
                        out.status,
                        json.dumps(out.body),
                        now_us,
                    ),
                )
            return out

        return await self._write_batched(tx)

    async def sweep(
        self,
        *,
        lease_grace: timedelta = LEASE_GRACE,
        idempotency_retention: timedelta = IDEMPOTENCY_RETENTION,
    ) -> SweepResult:
        def tx(c: sqlite3.Connection) -> SweepResult:
            now = _now_us()
            grace = int(lease_grace.total_seconds() * 1_000_000)
            keep = int(idempotency_retention.total_seconds() * 1_000_000)
            # Only token and expiry are cleared; the row and its last_fence stay.
            leases = c.execute(
                "UPDATE locks SET token = NULL, token_text = NULL, expires_at = NULL"
                " WHERE token IS NOT NULL AND expires_at < ?",
                (now - grace,),
            ).rowcount
            purged = c.execute(
                "DELETE FROM idempotency WHERE created_at < ?", (now - keep,)
            ).rowcount
            return SweepResult(leases, purged)

        return await self._run(lambda c: self._write(c, tx))

    # -- projects --------------------------------------------------------------------------

    async def create_project(self, name: str, anon_hash: str, service_hash: str) -> None:
        def tx(c: sqlite3.Connection) -> None:
            now = _now_us()
            try:
                cur = c.execute(
                    "INSERT INTO projects (name, anon_key_hash, created_at) VALUES (?, ?, ?)",
                    (name, anon_hash, now),
                )
            except sqlite3.IntegrityError as exc:
                raise ProjectExists(name) from exc
            c.execute(
                "INSERT INTO service_keys (key_hash, project_id, created_at) VALUES (?, ?, ?)",
                (service_hash, cur.lastrowid, now),
            )

        await self._run(lambda c: self._write(c, tx))

    async def list_projects(self) -> list[ProjectInfo]:
        def q(c: sqlite3.Connection) -> list[ProjectInfo]:
            rows = c.execute(
                "SELECT p.name, p.created_at, (SELECT count(*) FROM service_keys s"
                " WHERE s.project_id = p.id AND s.revoked_at IS NULL)"
                " FROM projects p ORDER BY p.name"
            ).fetchall()
            return [ProjectInfo(r[0], _to_dt(r[1]) or datetime.now(UTC), r[2]) for r in rows]

        return await self._run(q)

    async def rotate_service_key(self, name: str, service_hash: str) -> None:
        def tx(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT id FROM projects WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise ProjectNotFound(name)
            now = _now_us()
            c.execute(
                "UPDATE service_keys SET revoked_at = ?"
                " WHERE project_id = ? AND revoked_at IS NULL",
                (now, row[0]),
            )
            c.execute(
                "INSERT INTO service_keys (key_hash, project_id, created_at) VALUES (?, ?, ?)",
                (service_hash, row[0], now),
            )

        await self._run(lambda c: self._write(c, tx))
