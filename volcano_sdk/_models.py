"""The immutable values that lock calls return."""

from __future__ import annotations

import datetime

import attrs

__all__ = ["LockLease", "LockList", "LockState"]


@attrs.frozen
class LockLease:
    """A lease held by one owner: pass it to ``renew`` and ``release``.

    ``renew`` returns a new lease and leaves this one untouched, so keep its return value.
    ``expires_at`` is the service's expiry (database clock, aware UTC); the SDK's own safety
    decisions use a local monotonic deadline instead, never the wall clock.
    """

    key: str
    # The ownership token identifies the holder; it never appears in repr() or str().
    token: str = attrs.field(repr=False)
    expires_at: datetime.datetime
    fencing_token: int
    ttl: int = attrs.field(repr=False, eq=False)
    # time.monotonic() value after which the lease may have expired, measured from when the
    # call that produced it first went out; earlier than expires_at by at least the latency.
    local_deadline: float = attrs.field(repr=False, eq=False)


@attrs.frozen
class LockState:
    """What ``get`` reports about a lock, without acquiring it."""

    key: str
    held: bool
    expires_at: datetime.datetime | None
    fencing_token: int | None


@attrs.frozen
class LockList:
    """One page of held locks from ``list``; pass ``next_after`` as ``after`` for the next."""

    locks: tuple[LockState, ...]
    next_after: str | None
