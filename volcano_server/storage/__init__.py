"""Lock storage: one small interface (`Store`), two backends, chosen by database URL.

- `sqlite:///relative/path.db`, `sqlite:////absolute/path.db`: the embedded default.
- `postgresql://user@host:port/dbname` (or `postgres://`): for several replicas.
"""

from __future__ import annotations

from ._base import (
    IDEMPOTENCY_RETENTION,
    LEASE_GRACE,
    KeyLookup,
    LockRow,
    LockState,
    Mutation,
    Operation,
    Outcome,
    ProjectExists,
    ProjectInfo,
    ProjectNotFound,
    SchemaTooNew,
    StorageError,
    StorageUnavailable,
    Store,
    SweepResult,
)
from ._logic import format_time
from ._schema import LATEST_VERSION

__all__ = [
    "IDEMPOTENCY_RETENTION",
    "LATEST_VERSION",
    "LEASE_GRACE",
    "KeyLookup",
    "LockRow",
    "LockState",
    "Mutation",
    "Operation",
    "Outcome",
    "ProjectExists",
    "ProjectInfo",
    "ProjectNotFound",
    "SchemaTooNew",
    "StorageError",
    "StorageUnavailable",
    "Store",
    "SweepResult",
    "format_time",
    "open_store",
    "sqlite_path",
]


def sqlite_path(url: str) -> str:
    """`sqlite:///rel.db` -> `rel.db`; `sqlite:////abs/x.db` -> `/abs/x.db` (SQLAlchemy style)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ValueError(f"not a SQLite URL (expected sqlite:///path.db): {url!r}")
    return url[len(prefix) :]


def open_store(url: str) -> Store:
    """A store for the database URL, not yet opened (call `await store.open()`)."""
    if url.startswith("sqlite:"):
        from ._sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url))
    if url.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresStore

        return PostgresStore(url)
    raise ValueError(
        "unsupported database URL: expected sqlite:///path.db or postgresql://... "
        f"(got scheme {url.split(':', 1)[0]!r})"
    )
