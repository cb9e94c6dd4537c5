"""Answers the contract does not allow (from proxies, mostly) still map to the error tree.

The real server cannot produce these, so a transport plays the misbehaving proxy; the point is
that no httpx, JSON or generated-client exception ever reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from volcano_sdk import (
    AcquireOutcomeUnknownError,
    APIStatusError,
    AsyncVolcanoClient,
    NotFoundError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
    UnexpectedResponseError,
    VolcanoClient,
    VolcanoError,
)

LEASE_WITHOUT_FENCE = {"key": "k", "token": "t", "expires_at": "2026-11-29T12:00:00+00:00"}


Answer = Callable[[], httpx.Response]


def answering(answer: Answer) -> httpx.MockTransport:
    # A fresh response per request: a stream read by one client cannot serve another.
    return httpx.MockTransport(lambda request: answer())


CASES = [
    # (operation, answers, expected error)
    ("get", lambda: httpx.Response(499), APIStatusError),
    ("get", lambda: httpx.Response(520, text="<html>origin error</html>"), ServerError),
    ("get", lambda: httpx.Response(404, text="<html>not found</html>"), NotFoundError),
    ("get", lambda: httpx.Response(503, text="<html>maintenance</html>"), ServiceUnavailableError),
    (
        "get",
        lambda: httpx.Response(200, text="<html>captive portal</html>"),
        UnexpectedResponseError,
    ),
    ("get", lambda: httpx.Response(200, json={"held": True}), UnexpectedResponseError),
    (
        "get",
        lambda: httpx.Response(409, json={"error": {"code": "brand_new_code"}}),
        APIStatusError,
    ),
    ("force_release", lambda: httpx.Response(200, json=[1, 2]), UnexpectedResponseError),
    ("acquire", lambda: httpx.Response(200, json=LEASE_WITHOUT_FENCE), AcquireOutcomeUnknownError),
    (
        "acquire",
        lambda: httpx.Response(200, json={**LEASE_WITHOUT_FENCE, "fencing_token": "x"}),
        AcquireOutcomeUnknownError,
    ),
    ("acquire", lambda: httpx.Response(502, text="bad gateway"), AcquireOutcomeUnknownError),
    ("acquire", lambda: httpx.Response(503, text="<html>down</html>"), AcquireOutcomeUnknownError),
]


def _call(locks: object, operation: str) -> object:
    if operation == "acquire":
        return locks.acquire("k", ttl=30)  # type: ignore[attr-defined]
    return getattr(locks, operation)("k")


@pytest.mark.parametrize(("operation", "answer", "error"), CASES)
def test_sync_maps_odd_answers(operation: str, answer: Answer, error: type[VolcanoError]) -> None:
    with VolcanoClient("a", "s", "http://proxy.test", transport=answering(answer)) as client:
        with pytest.raises(error) as info:
            _call(client.locks, operation)
    assert isinstance(info.value, VolcanoError)


@pytest.mark.parametrize(("operation", "answer", "error"), CASES)
async def test_async_maps_odd_answers(
    operation: str, answer: Answer, error: type[VolcanoError]
) -> None:
    async with AsyncVolcanoClient(
        "a", "s", "http://proxy.test", transport=answering(answer)
    ) as client:
        with pytest.raises(error):
            result = _call(client.locks, operation)
            await result  # type: ignore[misc]


def test_unreachable_server_is_a_transport_error() -> None:
    with VolcanoClient("a", "s", "http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(TransportError) as info:
            client.locks.get("k")
    assert str(info.value) != "s" and info.value.request_id


def test_acquire_against_unreachable_server_is_recoverable() -> None:
    with VolcanoClient("a", "s", "http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(AcquireOutcomeUnknownError) as info:
            client.locks.acquire("k", ttl=30)
    assert info.value.token and info.value.request_id
    assert isinstance(info.value.__cause__, TransportError)
