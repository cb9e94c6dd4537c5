"""The protected resource: a counter per lock key, in PostgreSQL or in a SQLite file.

Each holder increments it by read-modify-write, fenced with the SDK's ``Fence``:

- claim (one transaction): ``Fence.claim`` raises the stored fence to the holder's (refused if
  a higher one was seen), an ``audit`` row records the claim, then the value is read;
- write (one transaction): ``Fence.verify`` (the stored fence must still be the holder's; the
  row stays locked until commit), the new value, and an ``audit`` row of the write.

The audit log is the resource's own story, in commit order (its rows are inserted while the
fence row is locked): the checker replays it to prove no update was lost and no stale fence
was accepted. A connection lost before COMMIT was sent means the write did not happen; lost
during COMMIT means it may have.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from volcano_sdk import Fence, StaleFenceError

__all__ = ["Outcome", "Store", "WriteUnknown"]

Outcome = str  # "ok", "fail" or "unknown"


class WriteUnknown(Exception):
    """The connection broke during COMMIT: the write may or may not have happened."""


class Store:
    """One connection (made lazily, remade after a failure) to one resource database."""

    def __init__(self, backend: str, target: str, *, naive: bool = False) -> None:
        self.backend = backend  # "postgres" (target: URL) or "sqlite" (target: file path)
        self.target = target
        # Sabotage, for testing the checker end to end: no claim before the read, the fence
        # checked (and raised) on the write only. Loses updates, as DESIGN.md says it would.
        self.naive = naive
        self._conn: Any = None

    # -- plumbing --------------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._conn is None:
            if self.backend == "sqlite":
                conn = sqlite3.connect(
                    self.target, timeout=30, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA journal_mode=WAL")
                self._conn = conn
            else:
                import psycopg

                self._conn = psycopg.connect(self.target, connect_timeout=3)
        return self._conn

    @property
    def _p(self) -> str:
        return "?" if self.backend == "sqlite" else "%s"

    def _begin(self) -> Any:
        conn = self._connect()
        cur = conn.cursor()
        if self.backend == "sqlite":
            cur.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock
        return cur

    def _rollback(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.rollback()
            self._conn = conn
        except Exception:
            with contextlib.suppress(Exception):  # the connection is gone either way
                conn.close()

    def _commit(self) -> None:
        try:
            self._conn.commit() if self.backend != "sqlite" else self._conn.execute("COMMIT")
        except Exception as exc:
            self._drop()
            raise WriteUnknown(str(exc)) from exc

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        self._drop()

    # -- schema --------------------------------------------------------------------------------

    def setup(self, resources: list[str]) -> None:
        serial = "INTEGER PRIMARY KEY AUTOINCREMENT" if self.backend == "sqlite" else "BIGSERIAL "
        serial += "" if self.backend == "sqlite" else "PRIMARY KEY"
        cur = self._begin()
        Fence(1, resource="x").create_table(cur)
        cur.execute(
            "CREATE TABLE IF NOT EXISTS counters (id TEXT PRIMARY KEY, value BIGINT NOT NULL)"
        )
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS audit (seq {serial}, resource TEXT NOT NULL, "
            "kind TEXT NOT NULL, fence BIGINT NOT NULL, op TEXT NOT NULL, old BIGINT, new BIGINT)"
        )
        p = self._p
        for r in resources:
            cur.execute(
                f"INSERT INTO counters (id, value) VALUES ({p}, 0) ON CONFLICT (id) DO NOTHING",
                (r,),
            )
        self._commit()

    # -- the fenced read-modify-write ----------------------------------------------------------

    def _claim(self, cur: Any, resource: str, fence: int, op: str) -> None:
        p = self._p
        Fence(fence, resource=resource).claim(cur)
        cur.execute(
            f"INSERT INTO audit (resource, kind, fence, op) VALUES ({p}, 'claim', {p}, {p})",
            (resource, fence, op),
        )

    def claim(self, resource: str, fence: int, op: str) -> int:
        """Claims ``resource`` with ``fence`` and reads it; ``StaleFenceError`` if refused."""
        p = self._p
        try:
            cur = self._begin()
            if not self.naive:
                self._claim(cur, resource, fence, op)
            cur.execute(f"SELECT value FROM counters WHERE id = {p}", (resource,))
            value = int(cur.fetchone()[0])
        except StaleFenceError:
            self._rollback()
            raise
        except Exception:
            self._drop()
            raise
        self._commit()  # a claim whose commit is unknown is simply not relied upon
        return value

    def write(self, resource: str, fence: int, op: str, old: int, new: int) -> None:
        """Writes ``new`` under ``fence``: ``StaleFenceError`` (refused), ``WriteUnknown``,
        another exception (failed before COMMIT: not written), or None (written)."""
        p = self._p
        try:
            cur = self._begin()
            if self.naive:
                self._claim(cur, resource, fence, op)
            else:
                Fence(fence, resource=resource).verify(cur)
            cur.execute(f"UPDATE counters SET value = {p} WHERE id = {p}", (new, resource))
            cur.execute(
                f"INSERT INTO audit (resource, kind, fence, op, old, new) "
                f"VALUES ({p}, 'write', {p}, {p}, {p}, {p})",
                (resource, fence, op, old, new),
            )
        except StaleFenceError:
            self._rollback()
            raise
        except Exception:
            self._drop()
            raise
        self._commit()

    def dump(self, resource: str) -> tuple[int, list[list[Any]]]:
        """The final value and the audit log of ``resource``, for the checker."""
        p = self._p
        cur = self._begin()
        cur.execute(f"SELECT value FROM counters WHERE id = {p}", (resource,))
        value = int(cur.fetchone()[0])
        cur.execute(
            f"SELECT seq, kind, fence, op, old, new FROM audit WHERE resource = {p} ORDER BY seq",
            (resource,),
        )
        rows = [list(row) for row in cur.fetchall()]
        self._commit()
        return value, rows
