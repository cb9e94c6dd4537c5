"""Waiting acquisition and the on_event hook, against the real server."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import LiveServer
from volcano_sdk import (
    AsyncVolcanoClient,
    ConflictError,
    LockEvent,
    LockEventKind,
    LockLostError,
    LossReason,
    VolcanoClient,
)


def test_waiting_acquire_gets_the_lock_when_the_holder_releases(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    held = other_client.locks.acquire(key, ttl=30)
    threading.Timer(0.5, other_client.locks.release, args=(key, held)).start()
    started = time.monotonic()
    lease = client.locks.acquire(key, ttl=30, wait=5)
    waited = time.monotonic() - started
    assert 0.5 <= waited < 2.0
    assert lease.fencing_token > held.fencing_token


def test_waiting_acquire_gives_up_after_wait(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    other_client.locks.acquire(key, ttl=30)
    started = time.monotonic()
    with pytest.raises(ConflictError):
        client.locks.acquire(key, ttl=30, wait=0.5)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_without_wait_a_held_lock_conflicts_at_once(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    other_client.locks.acquire(key, ttl=30)
    started = time.monotonic()
    with pytest.raises(ConflictError):
        client.locks.acquire(key, ttl=30)
    assert time.monotonic() - started < 0.5


async def test_async_with_lock_waits_too(
    async_client: AsyncVolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    held = other_client.locks.acquire(key, ttl=30)
    threading.Timer(0.3, other_client.locks.release, args=(key, held)).start()
    async with async_client.locks.with_lock(key, ttl=30, wait=5) as guard:
        assert guard.lease.fencing_token > held.fencing_token


def test_events_follow_a_guard_through_renewal_and_loss(
    live_server: LiveServer, other_client: VolcanoClient, key: str
) -> None:
    events: list[LockEvent] = []
    with VolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, on_event=events.append
    ) as client:
        lease = client.locks.acquire(key + "/raw", ttl=30)
        lease = client.locks.renew(key + "/raw", lease, ttl=30)
        client.locks.release(key + "/raw", lease)
        with pytest.raises(LockLostError):
            with client.locks.with_lock(key, ttl=5) as guard:
                time.sleep(2.0)  # one renewal at ~1.7 s
                other_client.locks.force_release(key)
                guard.wait_lost(timeout=5)
    kinds = [(e.kind, e.key.endswith("/raw")) for e in events]
    assert kinds[:3] == [
        (LockEventKind.ACQUIRED, True),
        (LockEventKind.RENEWED, True),
        (LockEventKind.RELEASED, True),
    ]
    guard_events = [e for e in events if not e.key.endswith("/raw")]
    assert [e.kind for e in guard_events][:2] == [LockEventKind.ACQUIRED, LockEventKind.RENEWED]
    assert guard_events[1].margin is not None and 2.5 < guard_events[1].margin < 3.6
    lost = [e for e in guard_events if e.kind is LockEventKind.LOST]
    assert len(lost) == 1 and lost[0].reason is LossReason.SUPERSEDED
    assert all(lease.token not in repr(e) for e in events)


def test_a_raising_hook_does_not_break_locking(live_server: LiveServer, key: str) -> None:
    def broken(event: LockEvent) -> None:
        raise RuntimeError("exporter down")

    with VolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, on_event=broken
    ) as client:
        lease = client.locks.acquire(key, ttl=30)
        assert client.locks.release(key, lease)
