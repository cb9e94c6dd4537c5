"""The ``with_lock`` guards and the one renewal scheduler per client that serves them all.

The guard's decisions (when to renew, when ownership is lost, what to raise at exit) are in
``_core.GuardState``; this module only supplies threads (sync) or tasks (async). A client's
scheduler is a single thread, or a single task, that hands due renewals to a small fixed pool
(sync) or to short-lived tasks (async), so 10,000 guards do not need 10,000 threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING

from ._core import GuardState, Outcome, RenewalSchedule, Request
from ._errors import LossReason, VolcanoError
from ._events import emit, lost, released, renewed
from ._locks import GuardArgs, run_async, run_sync
from ._models import LockLease

if TYPE_CHECKING:
    import asyncio

    from ._locks import AsyncLocks, Locks

__all__ = ["AsyncLockGuard", "AsyncRenewer", "LockGuard", "Renewer"]

logger = logging.getLogger("volcano_sdk")

# Renewal requests get the client's timeout, capped again by the guard at its local deadline.
RENEWAL_WORKERS = 3


class Renewer:
    """One scheduler thread and ``RENEWAL_WORKERS`` worker threads for all guards of a client."""

    def __init__(self, send: Callable[[Request], Outcome], request_timeout: float) -> None:
        self._send = send
        self.request_timeout = request_timeout
        self._schedule: RenewalSchedule[LockGuard] = RenewalSchedule()
        self._wakeup = threading.Condition()
        self._workers = ThreadPoolExecutor(RENEWAL_WORKERS, thread_name_prefix="volcano-renew")
        self._thread: threading.Thread | None = None
        self._closed = False

    def schedule(self, guard: LockGuard, due: float) -> None:
        with self._wakeup:
            if self._closed:
                return
            self._schedule.push(due, guard)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="volcano-renewal-scheduler", daemon=True
                )
                self._thread.start()
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._closed:
                    due = self._schedule.next_due()
                    now = time.monotonic()
                    if due is not None and due <= now:
                        break
                    self._wakeup.wait(None if due is None else due - now)
                if self._closed:
                    return
                ready = self._schedule.pop_due(time.monotonic())
            for guard in ready:
                self._workers.submit(guard._renew_once, self)

    def send(self, request: Request) -> Outcome:
        return self._send(request)

    def close(self) -> None:
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
        self._workers.shutdown(wait=True, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(timeout=5)


class LockGuard:
    """Holds a lock for a ``with`` block, renewing it in the background.

    ``lease`` is the latest lease, ``lost`` tells whether ownership is lost (or may be: it is
    True from the local deadline on, even if the renewal thread has not run), ``lost_reason``
    why, and ``wait_lost(timeout)`` waits for the loss like ``threading.Event.wait``.
    """

    def __init__(self, locks: Locks, renewer: Callable[[], object], args: GuardArgs) -> None:
        self._locks = locks
        self._renewer_factory = renewer
        self._args = args
        self._key = args.key
        self._ttl = args.ttl
        self._state: GuardState | None = None
        # Held across each renewal and the release, so exit never races an in-flight renewal.
        self._io = threading.Lock()
        self._lost_event = threading.Event()

    def __repr__(self) -> str:
        return f"<LockGuard key={self._key!r} ttl={self._ttl} lost={self.lost}>"

    def _held(self) -> GuardState:
        if self._state is None:
            raise RuntimeError("the guard holds no lease yet: use it in a `with` statement")
        return self._state

    @property
    def lease(self) -> LockLease:
        return self._held().lease

    @property
    def lost(self) -> bool:
        return self._held().is_lost(time.monotonic())

    @property
    def lost_reason(self) -> LossReason | None:
        return self._held().loss_reason(time.monotonic())

    def wait_lost(self, timeout: float | None = None) -> bool:
        """True as soon as ownership is lost; False if ``timeout`` seconds pass first."""
        state = self._held()
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if state.is_lost(now):
                return True
            # The deadline moves on each renewal: wake at the current one, then look again.
            wait = state.lease.local_deadline - now
            if end is not None:
                if now >= end:
                    return False
                wait = min(wait, end - now)
            self._lost_event.wait(max(wait, 0.0))

    def __enter__(self) -> LockGuard:
        if self._state is not None:
            raise RuntimeError("a LockGuard can be entered only once")
        args = self._args
        lease = self._locks.acquire(
            args.key, args.ttl, token=args.token, request_id=args.request_id, wait=args.wait
        )
        self._state = GuardState(key=self._key, ttl=self._ttl, lease=lease)
        renewer = self._renewer()
        renewer.schedule(self, self._state.next_renewal_at)
        return self

    def _renewer(self) -> Renewer:
        renewer = self._renewer_factory()
        assert isinstance(renewer, Renewer)
        return renewer

    def _renew_once(self, renewer: Renewer) -> None:
        state = self._held()
        with self._io:
            if not state.needs_renewal():
                return
            flow = state.renewal_flow(time.monotonic, renewer.request_timeout)
            old = state.lease
            try:
                state.renewed(run_sync(flow, renewer.send), time.monotonic())
                emit(self._locks._on_event, renewed(old, state.lease, time.monotonic()))
            except VolcanoError as error:
                state.renewal_failed(error, time.monotonic())
                logger.warning(
                    "renewal of %r failed: %s", self._key, error, extra={"lock_key": self._key}
                )
            except Exception:  # a bug must not kill the worker silently and leave `lost` False
                logger.exception("renewal of %r crashed", self._key)
                state.renewal_failed(VolcanoError("renewal crashed"), time.monotonic())
            if state.reason is not None:
                self._lost_event.set()
                emit(self._locks._on_event, lost(state.lease, state.reason))
            elif not state.closed:
                renewer.schedule(self, state.next_renewal_at)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        state = self._held()
        renewer = self._renewer()
        with self._io:
            state.closed = True
            loss = state.exit_error(time.monotonic())
            try:
                run_sync(state.release_flow(renewer.request_timeout), renewer.send)
                emit(self._locks._on_event, released(state.lease))
            except VolcanoError as error:
                # The lease expires by itself at its TTL; a failed release is not the block's fault.
                logger.warning("release of %r failed: %s", self._key, error)
        if loss is None:
            return
        if exc is None:
            raise loss
        exc.add_note(f"volcano_sdk: {loss}")


class AsyncRenewer:
    """One scheduler task for all guards of an async client; each due renewal is a short task."""

    def __init__(
        self, send: Callable[[Request], Awaitable[Outcome]], request_timeout: float
    ) -> None:
        self._send = send
        self.request_timeout = request_timeout
        self._schedule: RenewalSchedule[AsyncLockGuard] = RenewalSchedule()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._renewals: set[asyncio.Task[None]] = set()

    def schedule(self, guard: AsyncLockGuard, due: float) -> None:
        self._schedule.push(due, guard)
        import asyncio  # here, not at the top: sync users never pay its import time

        if self._task is None or self._task.done():
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())
        assert self._wakeup is not None
        self._wakeup.set()

    async def _run(self) -> None:
        import asyncio

        assert self._wakeup is not None
        while True:
            due = self._schedule.next_due()
            now = time.monotonic()
            if due is None or due > now:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), None if due is None else due - now)
                continue
            for guard in self._schedule.pop_due(now):
                task = asyncio.get_running_loop().create_task(guard._renew_once(self))
                self._renewals.add(task)  # keep a reference until it finishes
                task.add_done_callback(self._renewals.discard)

    async def send(self, request: Request) -> Outcome:
        return await self._send(request)

    async def close(self) -> None:
        import asyncio

        tasks = [t for t in (self._task, *self._renewals) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class AsyncLockGuard:
    """The async twin of ``LockGuard``: ``async with client.locks.with_lock(...) as guard``."""

    def __init__(self, locks: AsyncLocks, renewer: Callable[[], object], args: GuardArgs) -> None:
        self._locks = locks
        self._renewer_factory = renewer
        self._args = args
        self._key = args.key
        self._ttl = args.ttl
        self._state: GuardState | None = None
        import asyncio

        self._io = asyncio.Lock()
        self._lost_event = asyncio.Event()

    def __repr__(self) -> str:
        return f"<AsyncLockGuard key={self._key!r} ttl={self._ttl} lost={self.lost}>"

    def _held(self) -> GuardState:
        if self._state is None:
            raise RuntimeError("the guard holds no lease yet: use it in an `async with` statement")
        return self._state

    @property
    def lease(self) -> LockLease:
        return self._held().lease

    @property
    def lost(self) -> bool:
        return self._held().is_lost(time.monotonic())

    @property
    def lost_reason(self) -> LossReason | None:
        return self._held().loss_reason(time.monotonic())

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """True as soon as ownership is lost; False if ``timeout`` seconds pass first."""
        import asyncio

        state = self._held()
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if state.is_lost(now):
                return True
            wait = state.lease.local_deadline - now
            if end is not None:
                if now >= end:
                    return False
                wait = min(wait, end - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost_event.wait(), max(wait, 0.0))

    async def __aenter__(self) -> AsyncLockGuard:
        if self._state is not None:
            raise RuntimeError("an AsyncLockGuard can be entered only once")
        args = self._args
        lease = await self._locks.acquire(
            args.key, args.ttl, token=args.token, request_id=args.request_id, wait=args.wait
        )
        self._state = GuardState(key=self._key, ttl=self._ttl, lease=lease)
        self._renewer().schedule(self, self._state.next_renewal_at)
        return self

    def _renewer(self) -> AsyncRenewer:
        renewer = self._renewer_factory()
        assert isinstance(renewer, AsyncRenewer)
        return renewer

    async def _renew_once(self, renewer: AsyncRenewer) -> None:
        state = self._held()
        async with self._io:
            if not state.needs_renewal():
                return
            flow = state.renewal_flow(time.monotonic, renewer.request_timeout)
            old = state.lease
            try:
                state.renewed(await run_async(flow, renewer.send), time.monotonic())
                emit(self._locks._on_event, renewed(old, state.lease, time.monotonic()))
            except VolcanoError as error:
                state.renewal_failed(error, time.monotonic())
                logger.warning("renewal of %r failed: %s", self._key, error)
            except Exception:
                logger.exception("renewal of %r crashed", self._key)
                state.renewal_failed(VolcanoError("renewal crashed"), time.monotonic())
            if state.reason is not None:
                self._lost_event.set()
                emit(self._locks._on_event, lost(state.lease, state.reason))
            elif not state.closed:
                renewer.schedule(self, state.next_renewal_at)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        state = self._held()
        renewer = self._renewer()
        async with self._io:
            state.closed = True
            loss = state.exit_error(time.monotonic())
            try:
                await run_async(state.release_flow(renewer.request_timeout), renewer.send)
                emit(self._locks._on_event, released(state.lease))
            except VolcanoError as error:
                logger.warning("release of %r failed: %s", self._key, error)
        if loss is None:
            return
        if exc is None:
            raise loss
        exc.add_note(f"volcano_sdk: {loss}")
