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
    # Seen when the server terminated the connection while it sat idle in the pool
    # ("cannot switch to state 12; another operation is in progress"): the connection is
    # unusable, not the request wrong.
    asyncpg.InternalClientError,
)

# Errors of a connection that was fine when pooled and is dead now.
_STALE: tuple[type[BaseException], ...] = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.OperatorInterventionError,
    asyncpg.InternalClientError,
    ConnectionResetError,
    BrokenPipeError,
)

# An arbitrary constant: the advisory lock that serialises migrations of one database.
_MIGRATION_LOCK = 0x766F6C63

# The stored answer for this request id, if any, as one JSON array (fingerprint, status, body).
# Read in the same statement that locks the row.  A twin that commits while we wait for the row
# lock is not in this statement's snapshot; its record then makes our insert conflict, and the
# transaction is re-run (see _IdempotencyRace).
_SEEN_SUBQUERY = (
    "(SELECT json_build_array(fingerprint, status, body)::text FROM idempotency"
    " WHERE project_id = $1 AND request_id = $3) AS seen"
)
_SEEN = (
    "SELECT json_build_array(fingerprint, status, body)::text FROM idempotency"
    " WHERE project_id = $1 AND request_id = $2"
)
_LOCK_ROW = (
    "SELECT last_fence, token, token_text, expires_at, clock_timestamp() AS now, "
    + _SEEN_SUBQUERY
    + " FROM locks WHERE project_id = $1 AND key = $2 FOR UPDATE"
)
# Acquisition creates the key's row on first use; the no-op update on conflict locks an
# existing row and returns it, all in one statement.
_ACQUIRE_LOCK_ROW = (
    "INSERT INTO locks AS l (project_id, key, last_fence) VALUES ($1, $2, 0)"
    " ON CONFLICT (project_id, key) DO UPDATE SET last_fence = l.last_fence"
    " RETURNING last_fence, token, token_text, expires_at, clock_timestamp() AS now, "
    + _SEEN_SUBQUERY
)
_UPDATE = (
    "UPDATE locks SET last_fence = $3, token = $4, token_text = $5, expires_at = $6"
    " WHERE project_id = $1 AND key = $2"
)
_RECORD = (
    "INSERT INTO idempotency (project_id, request_id, fingerprint, status, body)"
    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1"
)
# A data-modifying CTE always runs: the row update and the record go in one round trip.
_UPDATE_AND_RECORD = (
    "WITH u AS (UPDATE locks SET last_fence = $3, token = $4, token_text = $5, expires_at = $6"
    " WHERE project_id = $1 AND key = $2)"
    " INSERT INTO idempotency (project_id, request_id, fingerprint, status, body)"
    " VALUES ($1, $7, $8, $9, $10) ON CONFLICT DO NOTHING RETURNING 1"
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
            # A pool that grew under load shrinks back once the load is gone.
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
                try:
                    yield conn
                except _UNAVAILABLE:
                    # Do not hand a broken connection to the next request: the pool
                    # replaces a terminated one on its next acquire.
                    conn.terminate()
                    raise
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
            await conn.fetchval("SELECT 1")

    async def schema_version(self) -> int:
        async with self._connection() as conn:
            return int(await conn.fetchval("SELECT version FROM schema_version") or 0)

    # -- lock operations -------------------------------------------------------------------

    async def _read(self, query: str, *args: object) -> asyncpg.Record | None:
        """One read-only query; retried once when a pooled connection turns out to be dead."""
        for attempt in (1, 2):
            try:
                async with self._connection() as conn:
                    row: asyncpg.Record | None = await conn.fetchrow(query, *args)
                    return row
            except StorageUnavailable as exc:
                # A connection the server dropped while it sat idle fails on first use; a
                # fresh one may well work.  A failure to connect is not retried here.
                if attempt == 2 or not isinstance(exc.__cause__, _STALE):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def lookup_keys(self, anon_hash: str, service_hash: str | None) -> KeyLookup:
        r = await self._read(
            "SELECT a.id AS ap, a.anon_key_hash AS ah, s.project_id AS sp, s.key_hash AS sh"
            " FROM (SELECT 1) one"
            " LEFT JOIN projects a ON a.anon_key_hash = $1"
            " LEFT JOIN service_keys s ON s.key_hash = $2 AND s.revoked_at IS NULL",
            anon_hash,
            service_hash,
        )
        assert r is not None
        return KeyLookup(r["ap"], r["ah"], r["sp"], r["sh"])

    async def get_lock(self, project_id: int, key: str) -> LockState:
        r = await self._read(
            "SELECT last_fence, token, token_text, expires_at, clock_timestamp() AS now"
            " FROM locks WHERE project_id = $1 AND key = $2",
            project_id,
            key,
        )
        if r is None:
            return LockState(False, None, None)
        row = LockRow(r["last_fence"], r["token"], r["token_text"], r["expires_at"])
        return _logic.state_of(row, r["now"])

    async def list_locks(
        self, project_id: int, *, prefix: str, after: str, limit: int
    ) -> list[tuple[str, LockState]]:
        for attempt in (1, 2):
            try:
                async with self._connection() as conn:
                    # COLLATE "C": bytewise order, whatever the database's locale.
                    rows = await conn.fetch(
                        "SELECT key, last_fence, expires_at FROM locks"
                        ' WHERE project_id = $1 AND key COLLATE "C" > $2'
                        " AND starts_with(key, $3) AND token IS NOT NULL"
                        " AND expires_at > clock_timestamp()"
                        ' ORDER BY key COLLATE "C" LIMIT $4',
                        project_id,
                        after,
                        prefix,
                        limit,
                    )
                    return [
                        (r["key"], LockState(True, r["expires_at"], r["last_fence"])) for r in rows
                    ]
            except StorageUnavailable as exc:
                if attempt == 2 or not isinstance(exc.__cause__, _STALE):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def mutate(self, mutation: Mutation) -> Outcome:
        async with self._connection() as conn:
            for _ in range(3):
                try:
                    async with conn.transaction():
                        return await self._mutate(conn, mutation)
                except _IdempotencyRace:
                    continue
        raise RuntimeError("request id race did not settle")  # pragma: no cover

    @staticmethod
    async def _mutate(conn: asyncpg.Connection, m: Mutation) -> Outcome:
        # Round trips dominate here (about 0.3 ms each on this machine, more than the commit's
        # flush), so each step is one statement: BEGIN, lock+read, write+record, COMMIT.
        if m.op == "acquire":
            r = await conn.fetchrow(_ACQUIRE_LOCK_ROW, m.project_id, m.key, m.dedup_id)
        else:
            r = await conn.fetchrow(_LOCK_ROW, m.project_id, m.key, m.dedup_id)
        if r is None:
            # No row: nothing to lock (and nothing to write); the request id is checked alone.
            row: LockRow | None = None
            seen = None
            if m.dedup_id is not None:
                seen = await conn.fetchval(_SEEN, m.project_id, m.dedup_id)
            now = await conn.fetchval("SELECT clock_timestamp()")
        else:
            row = LockRow(r["last_fence"], r["token"], r["token_text"], r["expires_at"])
            seen, now = r["seen"], r["now"]
        if seen is not None:
            fingerprint, status, body = json.loads(seen)
            return _logic.replay(m, fingerprint, status, body, now)

        decision = _logic.decide(m, row, now)
        w, out = decision.write, decision.outcome
        if w is not None and m.dedup_id is not None:
            stored = await conn.fetchval(
                _UPDATE_AND_RECORD,
                m.project_id,
                m.key,
                w.last_fence,
                w.token,
                w.token_text,
                w.expires_at,
                m.dedup_id,
                m.fingerprint,
                out.status,
                json.dumps(out.body),
            )
        elif w is not None:
            await conn.execute(
                _UPDATE, m.project_id, m.key, w.last_fence, w.token, w.token_text, w.expires_at
            )
            stored = 1
        elif m.dedup_id is not None:
            stored = await conn.fetchval(
                _RECORD, m.project_id, m.dedup_id, m.fingerprint, out.status, json.dumps(out.body)
            )
        else:
            stored = 1
        if stored is None:
            # A twin request with the same id committed first without sharing our row lock
            # (another key, or no row): undo ours and answer from its record on the next try.
            raise _IdempotencyRace
        return out

    async def sweep(
        self,
        *,
        lease_grace: timedelta = LEASE_GRACE,
        idempotency_retention: timedelta = IDEMPOTENCY_RETENTION,
    ) -> SweepResult:
        async with self._connection() as conn:
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
