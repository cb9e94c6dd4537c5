"""The storage interface every backend implements, and the values that cross it.

The lock semantics themselves live in `_logic.decide`, written once; a backend only has to load
one lock row under a write lock, ask `decide` what to do, write the answer and the idempotency
record in the same transaction, and commit.  That keeps SQLite and PostgreSQL behaving the same.

Exceptions::

    StorageError
     ├── StorageUnavailable      the database cannot be reached now (the API answers 503)
     ├── SchemaTooNew            the database was migrated by a newer server; refuse to run
     ├── ProjectExists           `projects create` with a name already taken
     └── ProjectNotFound         `projects rotate-service-key` with an unknown name
"""

from __future__ import annotations

import abc
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

__all__ = [
    "IDEMPOTENCY_RETENTION",
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
]

Operation = Literal["acquire", "renew", "release", "force_release"]

# DESIGN.md section 11 asks for "at least 24 hours"; records older than this are purged.
IDEMPOTENCY_RETENTION = timedelta(hours=24)
# The sweep clears a lease only this long after it expired, so that a late renew still gets the
# precise `lease_expired` and a late release by its holder still says `released: true`.
LEASE_GRACE = timedelta(minutes=5)


class StorageError(Exception):
    """Base of every storage failure."""


class StorageUnavailable(StorageError):
    """The database did not answer; nothing is known to have changed."""


class SchemaTooNew(StorageError):
    """The database schema is newer than this server understands."""


class ProjectExists(StorageError):
    """A project with this name exists already."""


class ProjectNotFound(StorageError):
    """No project has this name."""


@dataclass(frozen=True, slots=True)
class LockRow:
    """One key's row. It is never deleted, so `last_fence` survives every ownership period."""

    last_fence: int
    token: str | None  # normalised (lowercase) ownership token; None when free
    token_text: str | None  # the spelling the acquiring request used, echoed in leases
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class LockState:
    held: bool
    expires_at: datetime | None
    fencing_token: int | None


@dataclass(frozen=True, slots=True)
class Mutation:
    """One mutating request, already validated and authenticated."""

    project_id: int
    op: Operation
    key: str
    token_text: str | None = None  # as sent; compared through `token`
    ttl: int | None = None
    request_id: str | None = None  # as sent; None when the client sent none (no dedup)
    response_request_id: str = ""  # what error bodies name: the sent or the assigned id

    @property
    def token(self) -> str | None:
        return None if self.token_text is None else self.token_text.lower()

    @property
    def dedup_id(self) -> str | None:
        # Two spellings of one UUID are one request id.
        return None if self.request_id is None else self.request_id.lower()

    @property
    def fingerprint(self) -> str:
        parts = [self.op, self.key, self.token or "", "" if self.ttl is None else str(self.ttl)]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Outcome:
    """The HTTP answer to a mutation: what is sent, and what a replay sends again."""

    status: int
    body: dict[str, Any]
    replayed: bool = False  # answered from the idempotency record, not decided anew


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """Which projects the two presented key hashes belong to (None: unknown or revoked)."""

    anon_project: int | None
    anon_hash: str | None
    service_project: int | None
    service_hash: str | None


@dataclass(frozen=True, slots=True)
class ProjectInfo:
    name: str
    created_at: datetime
    service_keys: int  # active (unrevoked) service keys


@dataclass(frozen=True, slots=True)
class SweepResult:
    leases_cleared: int
    idempotency_purged: int


class Store(abc.ABC):
    """A lock store. Methods raise `StorageUnavailable` when the database cannot be reached."""

    @abc.abstractmethod
    async def open(self, *, schema_version: int | None = None) -> None:
        """Connect, then create or upgrade the schema (to `schema_version`, default latest)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def ping(self) -> None:
        """Run a trivial query; raise `StorageUnavailable` when it fails."""

    @abc.abstractmethod
    async def schema_version(self) -> int: ...

    @abc.abstractmethod
    async def lookup_keys(self, anon_hash: str, service_hash: str | None) -> KeyLookup: ...

    @abc.abstractmethod
    async def get_lock(self, project_id: int, key: str) -> LockState: ...

    @abc.abstractmethod
    async def list_locks(
        self, project_id: int, *, prefix: str, after: str, limit: int
    ) -> list[tuple[str, LockState]]:
        """Held (unexpired) locks whose key starts with `prefix` and sorts (bytewise) after
        `after`, in key order, at most `limit`."""

    @abc.abstractmethod
    async def mutate(self, mutation: Mutation) -> Outcome:
        """Apply one mutation atomically with its idempotency record, or replay a stored one."""

    @abc.abstractmethod
    async def sweep(
        self,
        *,
        lease_grace: timedelta = LEASE_GRACE,
        idempotency_retention: timedelta = IDEMPOTENCY_RETENTION,
    ) -> SweepResult:
        """Clear long-expired leases (keeping their fence) and purge old idempotency records."""

    @abc.abstractmethod
    async def create_project(self, name: str, anon_hash: str, service_hash: str) -> None: ...

    @abc.abstractmethod
    async def list_projects(self) -> list[ProjectInfo]: ...

    @abc.abstractmethod
    async def rotate_service_key(self, name: str, service_hash: str) -> None:
        """Revoke every service key of the project and register a new one, atomically."""
