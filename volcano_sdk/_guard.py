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
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from ._core import (
    MAX_RENEW_BATCH,
    GuardState,
    Outcome,
    RenewalSchedule,
    Request,
    renew_batch_flow,
)
from ._errors import ConflictError, LossReason, TransportError, VolcanoError
from ._events import emit, lost, released, renewed
from ._locks import GuardArgs, run_async, run_sync
from ._models import LockLease

if TYPE_CHECKING:
    import asyncio

    from ._locks import AsyncLocks, Locks

__all__ = ["AsyncLockGuard", "AsyncRenewer", "LockGuard", "Renewer"]

G = TypeVar("G")
GuardT = TypeVar("GuardT", "LockGuard", "AsyncLockGuard")

logger = logging.getLogger("volcano_sdk")

# Renewal requests get the client's timeout, capped again by the guard at its local deadline.
RENEWAL_WORKERS = 3
# Guards due within this many seconds of each other are renewed by one batch request: renewing
# a little early costs nothing, and 10,000 guards need a few requests a second, not 1,000.
BATCH_WINDOW = 0.25


def _batches(guards: list[G]) -> list[list[G]]:
    return [guards[i : i + MAX_RENEW_BATCH] for i in range(0, len(guards), MAX_RENEW_BATCH)]


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
                ready = self._schedule.pop_due(time.monotonic() + BATCH_WINDOW)
            for batch in _batches(ready):
                self._workers.submit(self._renew, batch)

    def _renew(self, guards: list[LockGuard]) -> None:
        # A guard whose lock is taken is exiting (it releases under that lock): leave it be.
        taken = [guard for guard in guards if guard._io.acquire(blocking=False)]
        again: list[LockGuard] = []
        try:
            due = _still_due(taken)
            if not due:
                return
            leases = [guard.lease for guard in due]
            flow = renew_batch_flow(
                leases, clock=time.monotonic, timeout=_timeout(due, self.request_timeout)
            )
            try:
                results = run_sync(flow, self._send)
            except VolcanoError as error:
                results = [error] * len(due)
            except Exception:  # a bug must not kill the worker silently and leave `lost` False
                logger.exception("renewal crashed")
                results = [VolcanoError("renewal crashed")] * len(due)
            again = _apply(due, leases, results)
        finally:
            for guard in taken:
                guard._io.release()
            for guard in again:
                self.schedule(guard, guard._held().next_renewal_at)

    def send(self, request: Request) -> Outcome:
        return self._send(request)

    def close(self) -> None:
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
        self._workers.shutdown(wait=True, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(timeout=5)


def _timeout(guards: Sequence[_Guard], request_timeout: float) -> float:
    now = time.monotonic()
    return min(guard._held().renewal_timeout(now, request_timeout) for guard in guards)


def _still_due(guards: Sequence[GuardT]) -> list[GuardT]:
    """The guards to renew now. One whose local deadline already passed is lost, not renewed:
    it must not cut the whole batch's timeout to nothing."""
    now = time.monotonic()
    due = []
    for guard in guards:
        state = guard._held()
        if not state.needs_renewal():
            if not state.closed:
                guard._signal_loss()  # lost by time, seen first by a reader of `lost`
            continue
        if state.lease.local_deadline <= now:
            guard._renewal_done(state.lease, TransportError("no renewal before the deadline"))
        else:
            due.append(guard)
    return due


def _apply(
    guards: Sequence[GuardT],
    leases: Sequence[LockLease],
    results: Sequence[LockLease | VolcanoError],
) -> list[GuardT]:
    """Applies a batch's results; the guards to schedule again (after their locks are freed,
    so that a quick next round never finds them still taken and skips them)."""
    return [
        guard
        for guard, old, result in zip(guards, leases, results, strict=True)
        if guard._renewal_done(old, result)
    ]


class _Guard:
    """What the sync and async guards share: state, the loss view, and renewal results."""

    _lost_event: threading.Event | asyncio.Event
    _locks: Locks | AsyncLocks

    def __init__(self, renewer: Callable[[], object], args: GuardArgs) -> None:
        self._renewer_factory = renewer
        self._args = args
        self._key = args.key
        self._ttl = args.ttl
        self._state: GuardState | None = None
        self._loss_signalled = False

    def __repr__(self) -> str:
        lost = None if self._state is None else self.lost
        return f"<{type(self).__name__} key={self._key!r} ttl={self._ttl} lost={lost}>"

    def _held(self) -> GuardState:
        if self._state is None:
            raise RuntimeError("the guard holds no lease yet: enter it with `with`/`async with`")
        return self._state

    @property
    def lease(self) -> LockLease:
        """The latest lease."""
        return self._held().lease

    @property
    def lost(self) -> bool:
        """Ownership is lost, or may be: True from the local deadline on, whatever else ran."""
        return self._held().is_lost(time.monotonic())

    @property
    def lost_reason(self) -> LossReason | None:
        return self._held().loss_reason(time.monotonic())

    def _renewal_done(self, old: LockLease, result: LockLease | VolcanoError) -> bool:
        """Applies one renewal's result; True when the guard is to be renewed again."""
        state = self._held()
        now = time.monotonic()
        if isinstance(result, LockLease):
            state.renewed(result, now)
            emit(self._locks._on_event, renewed(old, result, now))
        else:
            state.renewal_failed(result, now)
            logger.warning("renewal of %r failed: %s", self._key, result)
        if state.reason is not None:
            self._signal_loss()
            return False
        return not state.closed

    def _signal_loss(self) -> None:
        """Wakes ``wait_lost`` and emits ``lost``, once, whoever noticed the loss first."""
        state = self._held()
        if state.reason is None or self._loss_signalled:
            return
        self._loss_signalled = True
        self._lost_event.set()
        emit(self._locks._on_event, lost(state.lease, state.reason))

    def _released(self, outcome: bool | VolcanoError) -> VolcanoError | None:
        """Judges the release at exit; the loss to raise, if ownership turned out lost.

        A release refused (409) or that found nothing to free means the lease was gone before
        exit (taken over, force-released, expired): the block ran without ownership at the end.
        """
        state = self._held()
        now = time.monotonic()
        if outcome is True:
            emit(self._locks._on_event, released(state.lease))
        elif outcome is False:
            if state.loss_reason(now) is None:
                state.reason = LossReason.SUPERSEDED
        elif isinstance(outcome, ConflictError):
            if state.loss_reason(now) is None:
                state.renewal_failed(outcome, now)
        else:
            # The lease expires by itself at its TTL; a failed release is not the block's fault.
            logger.warning("release of %r failed: %s", self._key, outcome)
        self._signal_loss()
        return state.exit_error(now)


class LockGuard(_Guard):
    """Holds a lock for a ``with`` block, renewing it in the background.

    ``lease`` is the latest lease, ``lost`` tells whether ownership is lost (or may be: it is
    True from the local deadline on, even if the renewal thread has not run), ``lost_reason``
    why, and ``wait_lost(timeout)`` waits for the loss like ``threading.Event.wait``.
    """

    _locks: Locks
    _lost_event: threading.Event

    def __init__(self, locks: Locks, renewer: Callable[[], object], args: GuardArgs) -> None:
        super().__init__(renewer, args)
        self._locks = locks
        # Held across each renewal and the release, so exit never races an in-flight renewal.
        self._io = threading.Lock()
        self._lost_event = threading.Event()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """True as soon as ownership is lost; False if ``timeout`` seconds pass first."""
        state = self._held()
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            step = state.lost_wait(time.monotonic(), end)
            if isinstance(step, bool):
                return step
            self._lost_event.wait(step)

    def __enter__(self) -> LockGuard:
        if self._state is not None:
            raise RuntimeError("a LockGuard can be entered only once")
        args = self._args
        lease = self._locks.acquire(
            args.key, args.ttl, token=args.token, request_id=args.request_id, wait=args.wait
        )
        self._state = GuardState(key=self._key, ttl=self._ttl, lease=lease)
        self._renewer().schedule(self, self._state.next_renewal_at)
        return self

    def _renewer(self) -> Renewer:
        renewer = self._renewer_factory()
        assert isinstance(renewer, Renewer)
        return renewer

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
            outcome: bool | VolcanoError
            try:
                outcome = run_sync(state.release_flow(renewer.request_timeout), renewer.send)
            except VolcanoError as error:
                outcome = error
            loss = self._released(outcome)
        if loss is None:
            return
        if exc is None:
            raise loss
        exc.add_note(f"volcano_sdk: {loss}")


class AsyncRenewer:
    """One scheduler task for all guards of an async client; each due batch is a short task."""

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
            for batch in _batches(self._schedule.pop_due(now + BATCH_WINDOW)):
                task = asyncio.get_running_loop().create_task(self._renew(batch))
                self._renewals.add(task)  # keep a reference until it finishes
                task.add_done_callback(self._renewals.discard)

    async def _renew(self, guards: list[AsyncLockGuard]) -> None:
        # A guard whose lock is taken is exiting (it releases under that lock): leave it be.
        # An unlocked asyncio.Lock is taken without yielding, so nothing slips in between.
        taken = [guard for guard in guards if not guard._io.locked()]
        for guard in taken:
            await guard._io.acquire()
        again: list[AsyncLockGuard] = []
        try:
            due = _still_due(taken)
            if not due:
                return
            leases = [guard.lease for guard in due]
            flow = renew_batch_flow(
                leases, clock=time.monotonic, timeout=_timeout(due, self.request_timeout)
            )
            try:
                results = await run_async(flow, self._send)
            except VolcanoError as error:
                results = [error] * len(due)
            except Exception:
                logger.exception("renewal crashed")
                results = [VolcanoError("renewal crashed")] * len(due)
            again = _apply(due, leases, results)
        finally:
            for guard in taken:
                guard._io.release()
            for guard in again:
                self.schedule(guard, guard._held().next_renewal_at)

    async def send(self, request: Request) -> Outcome:
        return await self._send(request)

    async def close(self) -> None:
        import asyncio

        tasks = [t for t in (self._task, *self._renewals) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class AsyncLockGuard(_Guard):
    """The async twin of ``LockGuard``: ``async with client.locks.with_lock(...) as guard``."""

    _locks: AsyncLocks
    _lost_event: asyncio.Event

    def __init__(self, locks: AsyncLocks, renewer: Callable[[], object], args: GuardArgs) -> None:
        import asyncio

        super().__init__(renewer, args)
        self._locks = locks
        self._io = asyncio.Lock()
        self._lost_event = asyncio.Event()

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """True as soon as ownership is lost; False if ``timeout`` seconds pass first."""
        import asyncio

        state = self._held()
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            step = state.lost_wait(time.monotonic(), end)
            if isinstance(step, bool):
                return step
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost_event.wait(), step)

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
            outcome: bool | VolcanoError
            try:
                outcome = await run_async(state.release_flow(renewer.request_timeout), renewer.send)
            except VolcanoError as error:
                outcome = error
            loss = self._released(outcome)
        if loss is None:
            return
        if exc is None:
            raise loss
        exc.add_note(f"volcano_sdk: {loss}")
