"""``client.locks``: the lock operations, as thin sync and async shells over ``_core``'s flows."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import attrs

from ._core import (
    Flow,
    Outcome,
    Request,
    Sleep,
    acquire_flow,
    check_wait,
    force_release_flow,
    get_flow,
    list_flow,
    release_flow,
    renew_flow,
)
from ._events import EventHook, acquired, emit, released, renewed
from ._models import LockLease, LockList, LockState
from ._validation import check_key, check_ttl, check_uuid_string

if TYPE_CHECKING:
    from ._guard import AsyncLockGuard, LockGuard

__all__ = ["AsyncLocks", "GuardArgs", "Locks", "run_async", "run_sync"]

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
    import asyncio  # here, not at the top: sync users never pay its import time

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


@attrs.frozen
class GuardArgs:
    key: str
    ttl: int
    token: str | None = attrs.field(repr=False)
    request_id: str | None
    wait: float | None


def _check_guard_args(
    key: object, ttl: object, token: object | None, request_id: object | None, wait: object
) -> GuardArgs:
    # Checked when with_lock() is called, not at `with`, so a bad argument fails at its source.
    return GuardArgs(
        key=check_key(key),
        ttl=check_ttl(ttl),
        token=None if token is None else check_uuid_string(token, "token"),
        request_id=None if request_id is None else check_uuid_string(request_id, "request_id"),
        wait=None if wait is None else check_wait(wait),
    )


class Locks:
    """Lock operations of a ``VolcanoClient``. Every method accepts ``request_id``."""

    def __init__(
        self,
        send: Callable[[Request], Outcome],
        guards: Callable[[], object],
        on_event: EventHook | None = None,
    ) -> None:
        self._send = send
        self._guards = guards  # the client's shared renewal scheduler, created on first use
        self._on_event = on_event

    def acquire(
        self,
        key: str,
        ttl: int,
        *,
        token: str | None = None,
        request_id: str | None = None,
        wait: float | None = None,
    ) -> LockLease:
        """Acquires ``key`` for ``ttl`` seconds, or raises ``ConflictError`` if it is held.

        A transport failure or a 503 is retried once with the same token and request id; if
        that fails too, ``AcquireOutcomeUnknownError`` carries both for a manual recovery.
        With ``wait`` (seconds), a held lock is tried again until it frees or ``wait`` passes.
        """
        flow = acquire_flow(
            key, ttl, token=token, request_id=request_id, clock=time.monotonic, wait=wait
        )
        lease = run_sync(flow, self._send)
        emit(self._on_event, acquired(lease))
        return lease

    def get(self, key: str, *, request_id: str | None = None) -> LockState:
        """Reports whether ``key`` is held, without acquiring it."""
        return run_sync(get_flow(key, request_id=request_id), self._send)

    def renew(
        self, key: str, lease: LockLease, ttl: int, *, request_id: str | None = None
    ) -> LockLease:
        """Extends ``lease`` to ``ttl`` seconds from now; returns the new lease."""
        flow = renew_flow(key, lease, ttl, request_id=request_id, clock=time.monotonic)
        renewed_lease = run_sync(flow, self._send)
        emit(self._on_event, renewed(lease, renewed_lease, time.monotonic()))
        return renewed_lease

    def release(self, key: str, lease: LockLease, *, request_id: str | None = None) -> bool:
        """Releases ``lease``; returns False when the lock was already free."""
        freed = run_sync(release_flow(key, lease, request_id=request_id), self._send)
        emit(self._on_event, released(lease))
        return freed

    def force_release(self, key: str, *, request_id: str | None = None) -> bool:
        """Removes the current lease whoever holds it; returns whether one was removed.

        For administrative recovery only, with fencing enforced by the protected resource.
        """
        return run_sync(force_release_flow(key, request_id=request_id), self._send)

    def list(
        self,
        prefix: str | None = None,
        *,
        after: str | None = None,
        limit: int = 100,
        request_id: str | None = None,
    ) -> LockList:
        """One page of held locks in key order; pass ``next_after`` as ``after`` for more."""
        flow = list_flow(prefix=prefix, after=after, limit=limit, request_id=request_id)
        return run_sync(flow, self._send)

    def with_lock(
        self,
        key: str,
        ttl: int,
        *,
        token: str | None = None,
        request_id: str | None = None,
        wait: float | None = None,
    ) -> LockGuard:
        """A context manager that holds ``key``, renewing it in the background."""
        from ._guard import LockGuard

        return LockGuard(self, self._guards, _check_guard_args(key, ttl, token, request_id, wait))


class AsyncLocks:
    """Lock operations of an ``AsyncVolcanoClient``; the twin of ``Locks``."""

    def __init__(
        self,
        send: Callable[[Request], Awaitable[Outcome]],
        guards: Callable[[], object],
        on_event: EventHook | None = None,
    ) -> None:
        self._send = send
        self._guards = guards
        self._on_event = on_event

    async def acquire(
        self,
        key: str,
        ttl: int,
        *,
        token: str | None = None,
        request_id: str | None = None,
        wait: float | None = None,
    ) -> LockLease:
        """Acquires ``key`` for ``ttl`` seconds, or raises ``ConflictError`` if it is held.

        A transport failure or a 503 is retried once with the same token and request id; if
        that fails too, ``AcquireOutcomeUnknownError`` carries both for a manual recovery.
        With ``wait`` (seconds), a held lock is tried again until it frees or ``wait`` passes.
        """
        flow = acquire_flow(
            key, ttl, token=token, request_id=request_id, clock=time.monotonic, wait=wait
        )
        lease = await run_async(flow, self._send)
        emit(self._on_event, acquired(lease))
        return lease

    async def get(self, key: str, *, request_id: str | None = None) -> LockState:
        """Reports whether ``key`` is held, without acquiring it."""
        return await run_async(get_flow(key, request_id=request_id), self._send)

    async def renew(
        self, key: str, lease: LockLease, ttl: int, *, request_id: str | None = None
    ) -> LockLease:
        """Extends ``lease`` to ``ttl`` seconds from now; returns the new lease."""
        flow = renew_flow(key, lease, ttl, request_id=request_id, clock=time.monotonic)
        renewed_lease = await run_async(flow, self._send)
        emit(self._on_event, renewed(lease, renewed_lease, time.monotonic()))
        return renewed_lease

    async def release(self, key: str, lease: LockLease, *, request_id: str | None = None) -> bool:
        """Releases ``lease``; returns False when the lock was already free."""
        freed = await run_async(release_flow(key, lease, request_id=request_id), self._send)
        emit(self._on_event, released(lease))
        return freed

    async def force_release(self, key: str, *, request_id: str | None = None) -> bool:
        """Removes the current lease whoever holds it; returns whether one was removed.

        For administrative recovery only, with fencing enforced by the protected resource.
        """
        return await run_async(force_release_flow(key, request_id=request_id), self._send)

    async def list(
        self,
        prefix: str | None = None,
        *,
        after: str | None = None,
        limit: int = 100,
        request_id: str | None = None,
    ) -> LockList:
        """One page of held locks in key order; pass ``next_after`` as ``after`` for more."""
        flow = list_flow(prefix=prefix, after=after, limit=limit, request_id=request_id)
        return await run_async(flow, self._send)

    def with_lock(
        self,
        key: str,
        ttl: int,
        *,
        token: str | None = None,
        request_id: str | None = None,
        wait: float | None = None,
    ) -> AsyncLockGuard:
        """An async context manager that holds ``key``, renewing it in the background."""
        from ._guard import AsyncLockGuard

        return AsyncLockGuard(
            self, self._guards, _check_guard_args(key, ttl, token, request_id, wait)
        )
