"""PostgreSQL backend, through asyncpg (measured faster than psycopg 3 here; docs/server.md).

Several server processes on one database are one lock service: every mutation is one short
transaction that first locks the key's row (`SELECT ... FOR UPDATE`), so acquisitions of one key
serialise in the database, and the fence is read and bumped under that lock.  No lock is held
between requests.  "Now" is the database's `clock_timestamp()`, read while the row is locked, so
every replica uses the same clock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg

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
from ._schema import LATEST_VERSION, POSTGRES_MIGRATIONS, too_new_message

__all__ = ["PostgresStore"]

# Any of these means "the database is not there right now"; the pool replaces broken
# connections on the next acquire, so the service recovers by itself once it returns.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable (ConnectionError is a subclass)
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,  # e.g. "connection is closed"
    asyncpg.CannotConnectNowError,
    asyncpg.OperatorInterventionError,  # admin shutdown, pg_terminate_backend
    asyncpg.InsufficientResourcesError,  # too many connections
)

# An arbitrary constant: the advisory lock that serialises migrations of one database.
_MIGRATION_LOCK = 0x766F6C63

_LOCK_ROW = (
    "SELECT last_fence, token, token_text, expires_at, clock_timestamp() AS now"
    " FROM locks WHERE project_id = $1 AND key = $2 FOR UPDATE"
)


class _IdempotencyRace(Exception):
    """A concurrent request with the same request id committed first; run again to replay it."""


class PostgresStore(Store):
    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 3.0,
        command_timeout: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self._pool: asyncpg.Pool | None = None
        self._pool_args: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "timeout": connect_timeout,
            "command_timeout": command_timeout,
            # Clients stay quick to notice a dead server.
            "max_inactive_connection_lifetime": 60.0,
        }
        self._acquire_timeout = connect_timeout + 2.0

    # -- plumbing --------------------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise StorageUnavailable("the store is not open")
        try:
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                yield conn
        except _UNAVAILABLE as exc:
            raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self, *, schema_version: int | None = None) -> None:
        if self._pool is not None:
            return
        try:
            self._pool = await asyncpg.create_pool(self.dsn, **self._pool_args)
        except _UNAVAILABLE as exc:
            raise StorageUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            await self._migrate(schema_version or LATEST_VERSION)
        except BaseException:
            await self.close()
            raise

    async def _migrate(self, target: int) -> None:
        async with self._connection() as conn, conn.transaction():
            # Replicas starting together take turns; the loser then finds nothing to do.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)"
            )
            current = await conn.fetchval("SELECT version FROM schema_version") or 0
            if current > LATEST_VERSION:
                raise SchemaTooNew(too_new_message(current))
            for version in range(current + 1, target + 1):
                for statement in POSTGRES_MIGRATIONS[version]:
                    await conn.execute(statement)
            if target > current:
                await conn.execute(
                    "INSERT INTO schema_version (id, version) VALUES (1, $1)"
                    " ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                    target,
                )

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=5)
            except _UNAVAILABLE:  # includes the timeout
                pool.terminate()

    async def ping(self) -> None:
        async with self._connection() as conn:
            try:
                await conn.fetchval("SELECT 1")
            except _UNAVAILABLE as exc:
                raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc

    async def schema_version(self) -> int:
        async with self._connection() as conn:
            return int(await conn.fetchval("SELECT version FROM schema_version") or 0)

    # -- lock operations -------------------------------------------------------------------

    async def lookup_keys(self, anon_hash: str, service_hash: str | None) -> KeyLookup:
        async with self._connection() as conn:
            try:
                r = await conn.fetchrow(
                    "SELECT a.id AS ap, a.anon_key_hash AS ah, s.project_id AS sp,"
                    " s.key_hash AS sh"
                    " FROM (SELECT 1) one"
                    " LEFT JOIN projects a ON a.anon_key_hash = $1"
                    " LEFT JOIN service_keys s ON s.key_hash = $2 AND s.revoked_at IS NULL",
                    anon_hash,
                    service_hash,
                )
            except _UNAVAILABLE as exc:
                raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        assert r is not None
        return KeyLookup(r["ap"], r["ah"], r["sp"], r["sh"])

    async def get_lock(self, project_id: int, key: str) -> LockState:
        async with self._connection() as conn:
            try:
                r = await conn.fetchrow(
                    "SELECT last_fence, token, token_text, expires_at, clock_timestamp() AS now"
                    " FROM locks WHERE project_id = $1 AND key = $2",
                    project_id,
                    key,
                )
            except _UNAVAILABLE as exc:
                raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        if r is None:
            return LockState(False, None, None)
        row = LockRow(r["last_fence"], r["token"], r["token_text"], r["expires_at"])
        return _logic.state_of(row, r["now"])

    async def mutate(self, mutation: Mutation) -> Outcome:
        async with self._connection() as conn:
            try:
                for _ in range(3):
                    try:
                        async with conn.transaction():
                            return await self._mutate(conn, mutation)
                    except _IdempotencyRace:
                        continue
            except _UNAVAILABLE as exc:
                raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        raise RuntimeError("request id race did not settle")  # pragma: no cover

    @staticmethod
    async def _mutate(conn: asyncpg.Connection, m: Mutation) -> Outcome:
        r = await conn.fetchrow(_LOCK_ROW, m.project_id, m.key)
        if r is None and m.op == "acquire":
            # First acquisition of this key: create its row, then lock it like any other.
            await conn.execute(
                "INSERT INTO locks (project_id, key, last_fence) VALUES ($1, $2, 0)"
                " ON CONFLICT (project_id, key) DO NOTHING",
                m.project_id,
                m.key,
            )
            r = await conn.fetchrow(_LOCK_ROW, m.project_id, m.key)
        if m.dedup_id is not None:
            # Checked after the row lock, so a concurrent twin on the same key is already
            # committed and visible here (READ COMMITTED takes a new snapshot per statement).
            seen = await conn.fetchrow(
                "SELECT fingerprint, status, body FROM idempotency"
                " WHERE project_id = $1 AND request_id = $2",
                m.project_id,
                m.dedup_id,
            )
            if seen is not None:
                return _logic.replay(m, seen["fingerprint"], seen["status"], seen["body"])
        if r is not None:
            row: LockRow | None = LockRow(
                r["last_fence"], r["token"], r["token_text"], r["expires_at"]
            )
            now = r["now"]
        else:
            row = None
            now = await conn.fetchval("SELECT clock_timestamp()")
        decision = _logic.decide(m, row, now)
        w = decision.write
        if w is not None:
            await conn.execute(
                "UPDATE locks SET last_fence = $3, token = $4, token_text = $5, expires_at = $6"
                " WHERE project_id = $1 AND key = $2",
                m.project_id,
                m.key,
                w.last_fence,
                w.token,
                w.token_text,
                w.expires_at,
            )
        out = decision.outcome
        if m.dedup_id is not None:
            stored = await conn.fetchval(
                "INSERT INTO idempotency (project_id, request_id, fingerprint, status, body)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1",
                m.project_id,
                m.dedup_id,
                m.fingerprint,
                out.status,
                json.dumps(out.body),
            )
            if stored is None:
                # A twin without a row lock in common (other key, or no row) won the race:
                # undo ours and answer from its record.
                raise _IdempotencyRace
        return out

    async def sweep(
        self,
        *,
        lease_grace: timedelta = LEASE_GRACE,
        idempotency_retention: timedelta = IDEMPOTENCY_RETENTION,
    ) -> SweepResult:
        async with self._connection() as conn:
            try:
                # Only token and expiry are cleared; the row and its last_fence stay.
                leases = await conn.execute(
                    "UPDATE locks SET token = NULL, token_text = NULL, expires_at = NULL"
                    " WHERE token IS NOT NULL AND expires_at < clock_timestamp() - $1::interval",
                    lease_grace,
                )
                purged = await conn.execute(
                    "DELETE FROM idempotency WHERE created_at < clock_timestamp() - $1::interval",
                    idempotency_retention,
                )
            except _UNAVAILABLE as exc:
                raise StorageUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        return SweepResult(int(leases.split()[-1]), int(purged.split()[-1]))

    # -- projects --------------------------------------------------------------------------

    async def create_project(self, name: str, anon_hash: str, service_hash: str) -> None:
        async with self._connection() as conn, conn.transaction():
            try:
                pid = await conn.fetchval(
                    "INSERT INTO projects (name, anon_key_hash) VALUES ($1, $2) RETURNING id",
                    name,
                    anon_hash,
                )
            except asyncpg.UniqueViolationError as exc:
                raise ProjectExists(name) from exc
            await conn.execute(
                "INSERT INTO service_keys (key_hash, project_id) VALUES ($1, $2)",
                service_hash,
                pid,
            )

    async def list_projects(self) -> list[ProjectInfo]:
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT p.name, p.created_at, (SELECT count(*) FROM service_keys s"
                " WHERE s.project_id = p.id AND s.revoked_at IS NULL) AS n"
                " FROM projects p ORDER BY p.name"
            )
        return [ProjectInfo(r["name"], r["created_at"], r["n"]) for r in rows]

    async def rotate_service_key(self, name: str, service_hash: str) -> None:
        async with self._connection() as conn, conn.transaction():
            pid = await conn.fetchval("SELECT id FROM projects WHERE name = $1 FOR UPDATE", name)
            if pid is None:
                raise ProjectNotFound(name)
            await conn.execute(
                "UPDATE service_keys SET revoked_at = now()"
                " WHERE project_id = $1 AND revoked_at IS NULL",
                pid,
            )
            await conn.execute(
                "INSERT INTO service_keys (key_hash, project_id) VALUES ($1, $2)",
                service_hash,
                pid,
            )
