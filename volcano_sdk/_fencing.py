"""Fencing in your own database: refuse writes from a holder whose lease was superseded.

A lease alone cannot stop a worker that paused past its TTL; the protected store must refuse
it. ``Fence`` keeps one row per protected resource with the highest fencing token seen, and works
with any DB-API connection whose database has ``INSERT ... ON CONFLICT`` (PostgreSQL through
psycopg, SQLite 3.24+ through ``sqlite3``)::

    fence = Fence(lease.fencing_token, resource="daily-report")
    with conn:                          # one transaction
        fence.claim(conn.cursor())      # before reading: raise the stored fence to ours
        data = read(conn)
    ...
    with conn:                          # the write's transaction
        fence.verify(conn.cursor())     # still ours? (also locks the row until commit)
        write(conn, data)

Why claim first: checking the fence on the write alone loses updates in read-modify-write.
A reads; B takes over and reads; A writes with fence 5 and is accepted (the store has not seen
6 yet); B writes with fence 6 on top of data it read before A's write, and A's update is gone.
With the claim, B raises the stored fence to 6 before reading, so A's ``verify`` fails and A's
write never happens.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Protocol

import attrs

from ._errors import StaleFenceError

__all__ = ["DEFAULT_FENCE_TABLE", "Fence"]

DEFAULT_FENCE_TABLE = "volcano_fences"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class Cursor(Protocol):
    """The part of a DB-API 2 cursor that the helpers use."""

    @property
    def rowcount(self) -> int: ...
    def execute(self, operation: Any, parameters: Any = ..., /) -> Any: ...


def _placeholder(cursor: Cursor) -> str:
    # DB-API drivers name their parameter style at module level: sqlite3 says "qmark",
    # psycopg "pyformat". Only the two styles these databases use are needed.
    module = sys.modules.get(type(cursor).__module__.split(".", 1)[0])
    style = getattr(module, "paramstyle", "qmark")
    return "?" if style == "qmark" else "%s"


def _check_table(table: str) -> str:
    if not _IDENTIFIER.fullmatch(table):
        raise ValueError(f"table must be a plain SQL identifier, got {table!r}")
    return table


@attrs.frozen
class Fence:
    """One holder's fencing token for one protected resource."""

    token: int = attrs.field()
    resource: str
    table: str = attrs.field(default=DEFAULT_FENCE_TABLE, converter=_check_table)

    @token.validator
    def _positive(self, attribute: object, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"a fencing token is a positive int, got {value!r}")

    def create_table(self, cursor: Cursor) -> None:
        """Creates the fence table if it does not exist (``BIGINT`` suits both databases)."""
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(resource TEXT PRIMARY KEY, fence BIGINT NOT NULL)"
        )

    def claim(self, cursor: Cursor) -> None:
        """Raises the stored fence to this token, or raises ``StaleFenceError`` if it is higher.

        Call it before reading the resource, in a transaction; a newer holder's claim makes
        every later ``verify`` of this fence fail.
        """
        p = _placeholder(cursor)
        cursor.execute(
            f"INSERT INTO {self.table} (resource, fence) VALUES ({p}, {p}) "
            f"ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence "
            f"WHERE {self.table}.fence <= excluded.fence",
            (self.resource, self.token),
        )
        if cursor.rowcount != 1:
            raise self._stale("claim")

    def verify(self, cursor: Cursor) -> None:
        """Raises ``StaleFenceError`` unless the stored fence is still this token.

        Call it in the write's own transaction, just before the write: the UPDATE locks the
        fence row until commit, so no newer claim can slip in between the check and the write.
        """
        p = _placeholder(cursor)
        cursor.execute(
            f"UPDATE {self.table} SET fence = fence WHERE resource = {p} AND fence = {p}",
            (self.resource, self.token),
        )
        if cursor.rowcount != 1:
            raise self._stale("write")

    def _stale(self, what: str) -> StaleFenceError:
        return StaleFenceError(
            f"{what} refused for {self.resource!r}: fencing token {self.token} is stale "
            "(a newer holder has claimed the resource, or it was never claimed)",
            resource=self.resource,
            fencing_token=self.token,
        )
