"""``client.locks``: the lock operations, as thin sync and async shells over ``_core``'s flows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ._core import (
    Flow,
    Outcome,
    Request,
    Sleep,
    acquire_flow,
    force_release_flow,
    get_flow,
    release_flow,
    renew_flow,
)
from ._models import LockLease, LockState
from ._validation import check_key, check_ttl, check_uuid_string

if TYPE_CHECKING:
    from ._guard import AsyncLockGuard, LockGuard

__all__ = ["AsyncLocks", "Locks", "run_async", "run_sync"]

T = TypeVar("T")


def run_sync(flow: Flow[T], send: Callable[[Request], Outcome]) -> T:
    """Drives a flow with blocking I/O."""
    try:
        step = next(flow)
        while True:
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                step = flow.send(None)
            else:
                step = flow.send(send(step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(flow: Flow[T], send: Callable[[Request], Awaitable[Outcome]]) -> T:
    """Drives a flow with awaits; the same steps as ``run_sync``."""
    try:
        step = next(flow)
        while True:
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                step = flow.send(None)
            else:
                step = flow.send(await send(step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _check_guard_args(
    key: object, ttl: object, token: object | None, request_id: object | None
) -> tuple[str, int, str | None, str | None]:
    # Checked when with_lock() is called, not at `with`, so a bad argument fails at its source.
    return (
        check_key(key),
        check_ttl(ttl),
        None if token is None else check_uuid_string(token, "token"),
        None if request_id is None else check_uuid_string(request_id, "request_id"),
    )


class Locks:
    """Lock operations of a ``VolcanoClient``. Every method accepts ``request_id``."""

    def __init__(self, send: Callable[[Request], Outcome], guards: Callable[[], object]) -> None:
        self._send = send
        self._guards = guards  # the client's shared renewal scheduler, created on first use

    def acquire(
        self, key: str, ttl: int, *, token: str | None = None, request_id: str | None = None
    ) -> LockLease:
        """Acquires ``key`` for ``ttl`` seconds, or raises ``ConflictError`` if it is held.

        A transport failure or a 503 is retried once with the same token and request id; if
        that fails too, ``AcquireOutcomeUnknownError`` carries both for a manual recovery.
        """
        flow = acquire_flow(key, ttl, token=token, request_id=request_id, clock=time.monotonic)
        return run_sync(flow, self._send)

    def get(self, key: str, *, request_id: str | None = None) -> LockState:
        """Reports whether ``key`` is held, without acquiring it."""
        return run_sync(get_flow(key, request_id=request_id), self._send)

    def renew(
        self, key: str, lease: LockLease, ttl: int, *, request_id: str | None = None
    ) -> LockLease:
        """Extends ``lease`` to ``ttl`` seconds from now; returns the new lease."""
        flow = renew_flow(key, lease, ttl, request_id=request_id, clock=time.monotonic)
        return run_sync(flow, self._send)

    def release(self, key: str, lease: LockLease, *, request_id: str | None = None) -> bool:
        """Releases ``lease``; returns False when the lock was already free."""
        return run_sync(release_flow(key, lease, request_id=request_id), self._send)

    def force_release(self, key: str, *, request_id: str | None = None) -> bool:
        """Removes the current lease whoever holds it; returns whether one was removed.

        For administrative recovery only, with fencing enforced by the protected resource.
        """
        return run_sync(force_release_flow(key, request_id=request_id), self._send)

    def with_lock(
        self, key: str, ttl: int, *, token: str | None = None, request_id: str | None = None
    ) -> LockGuard:
        """A context manager that holds ``key``, renewing it in the background."""
        from ._guard import LockGuard

        return LockGuard(self, self._guards, *_check_guard_args(key, ttl, token, request_id))


class AsyncLocks:
    """Lock operations of an ``AsyncVolcanoClient``; the twin of ``Locks``."""

    def __init__(
        self, send: Callable[[Request], Awaitable[Outcome]], guards: Callable[[], object]
    ) -> None:
        self._send = send
        self._guards = guards

    async def acquire(
        self, key: str, ttl: int, *, token: str | None = None, request_id: str | None = None
    ) -> LockLease:
        """Acquires ``key`` for ``ttl`` seconds, or raises ``ConflictError`` if it is held.

        A transport failure or a 503 is retried once with the same token and request id; if
        that fails too, ``AcquireOutcomeUnknownError`` carries both for a manual recovery.
        """
        flow = acquire_flow(key, ttl, token=token, request_id=request_id, clock=time.monotonic)
        return await run_async(flow, self._send)

    async def get(self, key: str, *, request_id: str | None = None) -> LockState:
        """Reports whether ``key`` is held, without acquiring it."""
        return await run_async(get_flow(key, request_id=request_id), self._send)

    async def renew(
        self, key: str, lease: LockLease, ttl: int, *, request_id: str | None = None
    ) -> LockLease:
        """Extends ``lease`` to ``ttl`` seconds from now; returns the new lease."""
        flow = renew_flow(key, lease, ttl, request_id=request_id, clock=time.monotonic)
        return await run_async(flow, self._send)

    async def release(self, key: str, lease: LockLease, *, request_id: str | None = None) -> bool:
        """Releases ``lease``; returns False when the lock was already free."""
        return await run_async(release_flow(key, lease, request_id=request_id), self._send)

    async def force_release(self, key: str, *, request_id: str | None = None) -> bool:
        """Removes the current lease whoever holds it; returns whether one was removed.

        For administrative recovery only, with fencing enforced by the protected resource.
        """
        return await run_async(force_release_flow(key, request_id=request_id), self._send)

    def with_lock(
        self, key: str, ttl: int, *, token: str | None = None, request_id: str | None = None
    ) -> AsyncLockGuard:
        """An async context manager that holds ``key``, renewing it in the background."""
        from ._guard import AsyncLockGuard

        return AsyncLockGuard(self, self._guards, *_check_guard_args(key, ttl, token, request_id))
