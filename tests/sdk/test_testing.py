"""volcano_sdk.testing: the in-process server that lets users test their own loss handling."""

from __future__ import annotations

import socket

import pytest

from volcano_sdk import ConflictError, LockLostError, LossReason
from volcano_sdk.testing import LockServer


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("volcano_sdk.testing must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_expire_and_take_over_are_noticed_by_a_guard(no_network: None) -> None:
    with LockServer() as server, server.client() as client:
        lease = client.locks.acquire("daily-report", ttl=30)
        assert server.expire("daily-report") is True
        assert not client.locks.get("daily-report").held
        with pytest.raises(ConflictError) as info:
            client.locks.renew("daily-report", lease, ttl=30)
        assert info.value.code == "lease_expired"
        assert server.expire("daily-report") is False  # nothing held any more

        with pytest.raises(LockLostError) as lost:
            with client.locks.with_lock("daily-report", ttl=5) as guard:
                rival = server.take_over("daily-report")
                assert rival.fencing_token > guard.lease.fencing_token
                assert guard.wait_lost(timeout=5) is True
                assert guard.lost_reason is LossReason.SUPERSEDED
        assert lost.value.reason is LossReason.SUPERSEDED


async def test_async_client_on_the_callers_loop(no_network: None) -> None:
    with LockServer() as server:
        async with server.async_client() as client:
            with pytest.raises(LockLostError) as lost:
                async with client.locks.with_lock("job", ttl=5) as guard:
                    server.expire("job")
                    assert await guard.wait_lost(timeout=5) is True
            assert lost.value.reason is LossReason.EXPIRED


def test_servers_are_independent() -> None:
    with LockServer() as one, LockServer() as two, one.client() as a, two.client() as b:
        a.locks.acquire("k", ttl=30)
        assert not b.locks.get("k").held


def test_a_takeover_found_only_at_release_is_still_a_loss() -> None:
    with LockServer() as server, server.client() as client:
        with pytest.raises(LockLostError) as taken:
            with client.locks.with_lock("k1", ttl=30) as guard:
                server.take_over("k1")  # no renewal comes before the block ends
        assert taken.value.reason is LossReason.SUPERSEDED and guard.lost
        with pytest.raises(LockLostError) as freed:
            with client.locks.with_lock("k2", ttl=30) as guard:
                client.locks.force_release("k2")  # released=false at exit
        assert freed.value.reason is LossReason.SUPERSEDED and guard.lost


async def test_async_takeover_found_only_at_release_is_still_a_loss() -> None:
    with LockServer() as server:
        async with server.async_client() as client:
            with pytest.raises(LockLostError):
                async with client.locks.with_lock("k3", ttl=30):
                    server.take_over("k3")


def test_a_client_closed_inside_a_block_gives_sdk_errors_only() -> None:
    from volcano_sdk import VolcanoError

    with LockServer() as server:
        client = server.client()
        with pytest.raises(VolcanoError):
            with client.locks.with_lock("k4", ttl=30):
                client.close()
                client.locks.get("k4")
