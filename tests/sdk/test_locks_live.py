"""client.locks against the real server, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime
import uuid

import pytest

from tests.conftest import LiveServer
from volcano_sdk import (
    AsyncVolcanoClient,
    AuthenticationError,
    ConflictError,
    LockLease,
    PermissionDeniedError,
    VolcanoClient,
)


def test_acquire_get_renew_release(client: VolcanoClient, key: str) -> None:
    assert client.locks.get(key).fencing_token is None
    lease = client.locks.acquire(key, ttl=30)
    now = datetime.datetime.now(datetime.UTC)
    assert isinstance(lease, LockLease) and lease.key == key
    assert lease.expires_at.tzinfo is datetime.UTC
    assert datetime.timedelta(seconds=25) < lease.expires_at - now < datetime.timedelta(seconds=35)
    state = client.locks.get(key)
    assert (state.held, state.fencing_token, state.expires_at) == (
        True,
        lease.fencing_token,
        lease.expires_at,
    )
    renewed = client.locks.renew(key, lease, ttl=60)
    assert renewed is not lease and renewed.fencing_token == lease.fencing_token
    assert renewed.expires_at > lease.expires_at
    assert client.locks.release(key, renewed) is True
    assert client.locks.release(key, renewed) is False  # nothing left to free
    state = client.locks.get(key)
    assert (state.held, state.expires_at, state.fencing_token) == (False, None, lease.fencing_token)


def test_fencing_token_increases_across_owners(client: VolcanoClient, key: str) -> None:
    fences = []
    for _ in range(3):
        lease = client.locks.acquire(key, ttl=30)
        fences.append(lease.fencing_token)
        client.locks.release(key, lease)
    lease = client.locks.acquire(key, ttl=30)
    assert client.locks.force_release(key) is True
    assert client.locks.force_release(key) is False
    fences.append(lease.fencing_token)
    fences.append(client.locks.acquire(key, ttl=30).fencing_token)
    assert fences == sorted(set(fences)) and fences[0] >= 1


def test_competing_owner_gets_conflict_with_expiry_but_no_token(
    client: VolcanoClient, other_client: VolcanoClient, key: str
) -> None:
    lease = client.locks.acquire(key, ttl=30)
    with pytest.raises(ConflictError) as info:
        other_client.locks.acquire(key, ttl=30)
    assert info.value.status == 409 and info.value.code == "lock_held"
    assert info.value.expires_at == lease.expires_at
    assert lease.token not in str(info.value)
    # The competitor cannot renew or release what it does not hold.
    stranger = LockLease(
        key=key,
        token=str(uuid.uuid4()),
        expires_at=lease.expires_at,
        fencing_token=lease.fencing_token,
        ttl=30,
        local_deadline=0.0,
    )
    with pytest.raises(ConflictError):
        other_client.locks.renew(key, stranger, ttl=30)
    with pytest.raises(ConflictError):
        other_client.locks.release(key, stranger)
    assert client.locks.get(key).held


def test_caller_spelling_of_uuids_survives_every_operation(client: VolcanoClient, key: str) -> None:
    token = str(uuid.uuid4()).upper()
    request_id = str(uuid.uuid4()).upper()
    lease = client.locks.acquire(key, ttl=30, token=token, request_id=request_id)
    assert lease.token == token
    again = client.locks.acquire(key, ttl=30, token=token.lower())  # same owner, other spelling
    assert again.fencing_token == lease.fencing_token and again.token == token.lower()
    renewed = client.locks.renew(key, lease, ttl=30, request_id=str(uuid.uuid4()).upper())
    assert renewed.token == token
    assert client.locks.release(key, renewed, request_id=str(uuid.uuid4()).upper())


def test_same_request_id_replays_the_acquisition(client: VolcanoClient, key: str) -> None:
    token, request_id = str(uuid.uuid4()), str(uuid.uuid4())
    first = client.locks.acquire(key, ttl=30, token=token, request_id=request_id)
    second = client.locks.acquire(key, ttl=30, token=token, request_id=request_id)
    assert second == first


@pytest.mark.parametrize("key_shape", ["a/b/c", "x:y.z-1_2", "...", "p/acquire", "k" * 255])
def test_keys_round_trip_exactly(client: VolcanoClient, key_shape: str) -> None:
    key = key_shape if key_shape == "k" * 255 else f"{key_shape}/{uuid.uuid4().hex[:6]}"
    key = key[:255]
    lease = client.locks.acquire(key, ttl=30)
    assert lease.key == key and client.locks.get(key).key == key
    client.locks.release(key, lease)


def test_wrong_credentials_are_rejected(live_server: LiveServer, key: str) -> None:
    with VolcanoClient(live_server.anon_key, "vls_wrong", live_server.url) as bad:
        with pytest.raises(AuthenticationError) as info:
            bad.locks.get(key)
        assert "vls_wrong" not in str(info.value)
    other_anon, _ = live_server.new_project("sdk-other")
    with (
        VolcanoClient(other_anon, live_server.service_key, live_server.url) as mixed,
        pytest.raises(PermissionDeniedError),
    ):
        mixed.locks.acquire(key, ttl=30)


def test_projects_are_isolated(live_server: LiveServer, client: VolcanoClient, key: str) -> None:
    client.locks.acquire(key, ttl=30)
    anon, service = live_server.new_project("sdk-isolated")
    with VolcanoClient(anon, service, live_server.url) as elsewhere:
        assert not elsewhere.locks.get(key).held
        elsewhere.locks.acquire(key, ttl=30)  # the same key in another project is another lock


async def test_async_twin_does_the_same(async_client: AsyncVolcanoClient, key: str) -> None:
    lease = await async_client.locks.acquire(key, ttl=30)
    assert (await async_client.locks.get(key)).fencing_token == lease.fencing_token
    renewed = await async_client.locks.renew(key, lease, ttl=40)
    assert renewed.fencing_token == lease.fencing_token
    with pytest.raises(ConflictError):
        await async_client.locks.acquire(key, ttl=30)
    assert await async_client.locks.release(key, renewed)
    assert await async_client.locks.force_release(key) is False


def test_bad_arguments_send_nothing(live_server: LiveServer) -> None:
    from tests.sdk.conftest import FaultyTransport

    transport = FaultyTransport([])
    with VolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    ) as c:
        with pytest.raises(TypeError):
            c.locks.acquire("k", ttl=True)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            c.locks.acquire("..", ttl=30)
        with pytest.raises(ValueError):
            c.locks.acquire("k", ttl=30, token="not-a-uuid")
        with pytest.raises(ValueError):
            c.locks.get("k", request_id="nope")
        with pytest.raises(TypeError):
            c.locks.release("k", "lease")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            c.locks.with_lock("k", ttl=4)
    assert transport.sent == []
