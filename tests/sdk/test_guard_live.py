"""with_lock guards against the real server: renewal, loss, exit rules (both backends)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.conftest import LiveServer
from tests.sdk.conftest import FaultyTransport
from volcano_sdk import AsyncVolcanoClient, LockLostError, LossReason, VolcanoClient

TTL = 5  # the shortest TTL the service allows: renewals come every ~1.7 s


@pytest.mark.slow
async def test_sync_and_async_guards_hold_across_several_ttls(
    client: VolcanoClient,
    async_client: AsyncVolcanoClient,
    other_client: VolcanoClient,
    key: str,
) -> None:
    hold = 2.2 * TTL
    sync_key, async_key = key + "/sync", key + "/async"
    seen: dict[str, object] = {}

    def hold_sync() -> None:
        with client.locks.with_lock(sync_key, ttl=TTL) as guard:
            first = guard.lease
            seen["lost_early"] = guard.wait_lost(timeout=hold)
            seen["sync"] = (first, guard.lease, guard.lost)

    thread = threading.Thread(target=hold_sync)
    thread.start()
    async with async_client.locks.with_lock(async_key, ttl=TTL) as guard:
        first = guard.lease
        assert await guard.wait_lost(timeout=hold) is False
        assert not guard.lost and guard.lost_reason is None
        latest = guard.lease
    await asyncio.to_thread(thread.join)

    sync_first, sync_latest, sync_lost = seen["sync"]  # type: ignore[misc]
    assert seen["lost_early"] is False and sync_lost is False
    for before, after in ((first, latest), (sync_first, sync_latest)):
        assert after.fencing_token == before.fencing_token  # renewal keeps the fence
        assert (after.expires_at - before.expires_at).total_seconds() > TTL  # renewed repeatedly
    # Both released on exit.
    assert not other_client.locks.get(sync_key).held
    assert not other_client.locks.get(async_key).held


def test_force_release_is_noticed_through_wait_lost(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    with pytest.raises(LockLostError) as info:  # raised at exit, after cleanup
        with client.locks.with_lock(key, ttl=TTL) as guard:
            assert guard.wait_lost(timeout=0.2) is False
            assert other_client.locks.force_release(key)
            started = time.monotonic()
            assert guard.wait_lost(timeout=TTL) is True
            assert time.monotonic() - started < TTL / 3 + 1.0  # by the next renewal
            assert guard.lost and guard.lost_reason is LossReason.SUPERSEDED
            taken = other_client.locks.acquire(key, ttl=30)
    assert info.value.reason is LossReason.SUPERSEDED
    # The guard's release did not free the new owner's lease.
    assert other_client.locks.get(key).fencing_token == taken.fencing_token
    assert other_client.locks.get(key).held


def test_an_exception_from_the_block_takes_precedence_over_loss(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    with pytest.raises(KeyError) as info:
        with client.locks.with_lock(key, ttl=TTL) as guard:
            other_client.locks.force_release(key)
            guard.wait_lost(timeout=TTL)
            raise KeyError("the block failed")
    assert any("superseded" in note for note in info.value.__notes__)


def test_successful_block_releases_and_raises_nothing(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    with client.locks.with_lock(key, ttl=TTL) as guard:
        assert other_client.locks.get(key).fencing_token == guard.lease.fencing_token
    assert not other_client.locks.get(key).held


def test_unreachable_service_is_loss_at_the_local_deadline(
    sqlite_server: LiveServer, key: str
) -> None:
    live_server = sqlite_server  # client-side behaviour: one backend is enough
    # Every request after the acquisition is answered 503 by a dead proxy.
    transport = FaultyTransport(["pass"] + ["503-before"] * 100)
    with VolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    ) as isolated:
        with pytest.raises(LockLostError) as info:
            with isolated.locks.with_lock(key, ttl=TTL) as guard:
                deadline = guard.lease.local_deadline
                assert guard.wait_lost(timeout=TTL + 2) is True
                assert time.monotonic() >= deadline  # not before the deadline...
                assert time.monotonic() - deadline < 0.5  # ...and promptly at it
                assert guard.lost_reason is LossReason.UNREACHABLE
        assert info.value.reason is LossReason.UNREACHABLE
    assert len(transport.sent) > 3  # renewal was retried until the deadline


async def test_async_guard_notices_force_release(
    async_client: AsyncVolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    with pytest.raises(LockLostError):
        async with async_client.locks.with_lock(key, ttl=TTL) as guard:
            await asyncio.to_thread(other_client.locks.force_release, key)
            assert await guard.wait_lost(timeout=TTL) is True
            assert guard.lost_reason is LossReason.SUPERSEDED


PAUSED_HOLDER = textwrap.dedent(
    """
    import os, sys, time
    from volcano_sdk import VolcanoClient

    client = VolcanoClient(os.environ["A"], os.environ["S"], os.environ["U"])
    with client.locks.with_lock(os.environ["K"], ttl=5) as guard:
        # Before saying "held": the parent may stop us the moment it reads that line.
        last = time.monotonic()
        print("held", flush=True)
        for _ in range(2000):  # bounded: about 20 s
            now = time.monotonic()
            if now - last > 2.0:  # the first look after being stopped and resumed
                print("lost" if guard.lost else "NOT LOST", flush=True)
                break
            last = now
            time.sleep(0.01)
    """
)


@pytest.mark.slow
def test_paused_process_reads_lost_at_once_after_resuming(
    sqlite_server: LiveServer, key: str
) -> None:
    live_server = sqlite_server  # client-side behaviour: one backend is enough
    env = {
        **os.environ,
        "A": live_server.anon_key,
        "S": live_server.service_key,
        "U": live_server.url,
        "K": key,
    }
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSED_HOLDER], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        child.send_signal(signal.SIGSTOP)
        time.sleep(TTL + 1)  # past the TTL: the lease may have expired meanwhile
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    assert out.strip().splitlines()[0] == "lost"


def test_many_guards_share_a_few_renewal_threads_and_batch_requests(
    live_server: LiveServer, other_client: VolcanoClient, key: str
) -> None:
    from contextlib import ExitStack

    transport = FaultyTransport([])  # passes everything through, counting requests
    client = VolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    )
    before = threading.active_count()
    with client, ExitStack() as stack:
        guards = [
            stack.enter_context(client.locks.with_lock(f"{key}/{i}", ttl=TTL)) for i in range(100)
        ]
        first = [g.lease for g in guards]
        time.sleep(TTL * 0.6)  # at least one renewal round for every guard
        assert threading.active_count() - before <= 4
        assert not any(g.lost for g in guards)
        assert all(
            g.lease.expires_at > lease.expires_at for g, lease in zip(guards, first, strict=True)
        )
        batches = [r for r in transport.sent if r.url.path == "/locks/v1/leases/renew"]
        assert 1 <= len(batches) <= 10  # 100 renewals in a few batch requests, not 100
    assert not other_client.locks.get(f"{key}/0").held
