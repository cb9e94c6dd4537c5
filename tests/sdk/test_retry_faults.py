"""The retry rules of the seed, through a faulty transport in front of the real server."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import LiveServer
from tests.sdk.conftest import AsyncFaultyTransport, FaultyTransport
from volcano_sdk import (
    AcquireOutcomeUnknownError,
    AsyncVolcanoClient,
    AuthenticationError,
    ConflictError,
    ServiceUnavailableError,
    TransportError,
    ValidationError,
    VolcanoClient,
)


def faulty(
    server: LiveServer, faults: list[str], **kw: str
) -> tuple[VolcanoClient, FaultyTransport]:
    transport = FaultyTransport(faults)
    client = VolcanoClient(
        kw.get("anon", server.anon_key),
        kw.get("service", server.service_key),
        server.url,
        transport=transport,
    )
    return client, transport


def _identity(request: object) -> tuple[str, str, bytes, str, str]:
    headers = request.headers  # type: ignore[attr-defined]
    return (
        request.method,
        str(request.url),
        request.content,  # type: ignore[attr-defined]
        headers["x-request-id"],
        headers["authorization"],
    )


@pytest.mark.parametrize("fault", ["503-before", "503-after", "cut-after"])
def test_acquire_retries_once_with_the_identical_request(
    live_server: LiveServer, other_client: VolcanoClient, key: str, fault: str
) -> None:
    client, transport = faulty(live_server, [fault])
    with client:
        lease = client.locks.acquire(key, ttl=30)
    assert len(transport.sent) == 2
    assert _identity(transport.sent[0]) == _identity(transport.sent[1])
    state = other_client.locks.get(key)
    assert state.held and state.fencing_token == lease.fencing_token
    if fault != "503-before":
        # The first try was granted; the retry recovered that very lease, not a second one.
        with pytest.raises(ConflictError):
            other_client.locks.acquire(key, ttl=30)
        assert other_client.locks.get(key).fencing_token == lease.fencing_token


def test_twice_unavailable_gives_recoverable_outcome_unknown(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    caller_token = str(uuid.uuid4()).upper()
    flaky, transport = faulty(live_server, ["503-after", "503-after"])
    with flaky, pytest.raises(AcquireOutcomeUnknownError) as info:
        flaky.locks.acquire(key, ttl=30, token=caller_token)
    error = info.value
    assert len(transport.sent) == 2 and isinstance(error.__cause__, ServiceUnavailableError)
    assert error.token == caller_token and caller_token not in str(error)
    # The server granted the first try: a manual recovery with the error's ids gets that lease.
    granted = client.locks.get(key)
    assert granted.held
    recovered = client.locks.acquire(key, ttl=30, token=error.token, request_id=error.request_id)
    assert recovered.fencing_token == granted.fencing_token and recovered.token == caller_token


def test_transport_failure_twice_is_outcome_unknown(live_server: LiveServer, key: str) -> None:
    flaky, transport = faulty(live_server, ["cut-after", "cut-after"])
    with flaky, pytest.raises(AcquireOutcomeUnknownError) as info:
        flaky.locks.acquire(key, ttl=30)
    assert isinstance(info.value.__cause__, TransportError) and len(transport.sent) == 2


def test_conflict_is_not_retried(live_server: LiveServer, client: VolcanoClient, key: str) -> None:
    client.locks.acquire(key, ttl=30)
    other, transport = faulty(live_server, [])
    with other, pytest.raises(ConflictError):
        other.locks.acquire(key, ttl=30)
    assert len(transport.sent) == 1


def test_unauthorized_is_not_retried(live_server: LiveServer, key: str) -> None:
    bad, transport = faulty(live_server, [], service="vls_not-a-key")
    with bad, pytest.raises(AuthenticationError):
        bad.locks.acquire(key, ttl=30)
    assert len(transport.sent) == 1


def test_reused_request_id_is_a_validation_error_not_retried(
    live_server: LiveServer, key: str
) -> None:
    request_id = str(uuid.uuid4())
    client, transport = faulty(live_server, [])
    with client:
        client.locks.acquire(key, ttl=30, request_id=request_id)
        with pytest.raises(ValidationError) as info:
            client.locks.acquire(key + "-b", ttl=30, request_id=request_id)
    assert info.value.code == "idempotency_key_reused" and len(transport.sent) == 2


@pytest.mark.parametrize("fault", ["503-after", "cut-after"])
def test_other_operations_are_never_retried(
    live_server: LiveServer, client: VolcanoClient, key: str, fault: str
) -> None:
    lease = client.locks.acquire(key, ttl=30)
    flaky, transport = faulty(live_server, [fault, fault, fault])
    with flaky:
        with pytest.raises((ServiceUnavailableError, TransportError)):
            flaky.locks.renew(key, lease, ttl=30)
        with pytest.raises((ServiceUnavailableError, TransportError)):
            flaky.locks.get(key)
        with pytest.raises((ServiceUnavailableError, TransportError)):
            flaky.locks.release(key, lease)
    assert len(transport.sent) == 3


async def test_async_acquire_recovers_a_lease_whose_answer_was_cut(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    transport = AsyncFaultyTransport(["cut-after"])
    async with AsyncVolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    ) as flaky:
        lease = await flaky.locks.acquire(key, ttl=30)
    assert len(transport.sent) == 2
    assert client.locks.get(key).fencing_token == lease.fencing_token


async def test_async_twice_unavailable_is_outcome_unknown(
    live_server: LiveServer, key: str
) -> None:
    transport = AsyncFaultyTransport(["503-before", "503-before"])
    async with AsyncVolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    ) as flaky:
        with pytest.raises(AcquireOutcomeUnknownError):
            await flaky.locks.acquire(key, ttl=30)
    assert len(transport.sent) == 2
