"""POST /locks/v1/leases/renew: many renewals in one request, one result each (both backends)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import LiveServer
from tests.server._api import Api, new_key, new_token

PATH = "/locks/v1/leases/renew"


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[Api]:
    with Api.of(live_server) as api:
        yield api


def test_each_item_renews_or_fails_like_a_single_renewal(api: Api) -> None:
    held = [(new_key(), new_token()) for _ in range(3)]
    for key, token in held:
        api.acquire(key, token, ttl=5)
    other_key, other_token = new_key(), new_token()
    api.acquire(other_key, new_token())  # held by someone else
    never = new_key()
    items = [{"key": k, "token": t, "ttl": 60} for k, t in held]
    items += [
        {"key": other_key, "token": other_token, "ttl": 60},
        {"key": never, "token": new_token(), "ttl": 60},
    ]
    r = api.client.post(PATH, json={"leases": items})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["key"] for x in results] == [i["key"] for i in items]  # in order
    for (key, token), result in zip(held, results[:3], strict=True):
        assert result["status"] == 200 and result["lease"]["token"] == token
        assert 59_000 < result["lease"]["expires_in_ms"] <= 60_000
        assert api.get(key).json()["expires_at"] == result["lease"]["expires_at"]
    assert [(x["status"], x["error"]["code"]) for x in results[3:]] == [
        (409, "not_holder"),
        (409, "not_holder"),
    ]


def test_a_superseded_token_is_not_renewed(api: Api) -> None:
    key, token = new_key(), new_token()
    api.acquire(key, token, ttl=5)
    # Force-released and taken again: the first owner finds it gone.
    api.force_release(key)
    api.acquire(key, token, ttl=5)
    r = api.client.post(PATH, json={"leases": [{"key": key, "token": new_token(), "ttl": 30}]})
    assert r.json()["results"][0]["error"]["code"] == "not_holder"


@pytest.mark.parametrize(
    "body",
    [
        {"leases": []},
        {"leases": "x"},
        {"leases": [{"key": "a", "token": "00000000-0000-4000-8000-000000000001", "ttl": 30}] * 2},
        {"leases": [{"key": "..", "token": "00000000-0000-4000-8000-000000000001", "ttl": 30}]},
        {"leases": [{"key": "a", "token": "nope", "ttl": 30}]},
        {"leases": [{"key": "a", "token": "00000000-0000-4000-8000-000000000001", "ttl": True}]},
        {
            "leases": [
                {"key": f"k{i}", "token": "00000000-0000-4000-8000-000000000001", "ttl": 30}
                for i in range(501)
            ]
        },
        {},
    ],
)
def test_malformed_batches_get_422_and_change_nothing(api: Api, body: dict[str, object]) -> None:
    r = api.client.post(PATH, json=body)
    assert r.status_code in (413, 422), r.text
    assert r.json()["error"]["code"] in ("validation_failed", "payload_too_large")


def test_a_full_batch_fits_the_body_limit(api: Api) -> None:
    token = new_token()
    keys = [new_key("b" * 40) for _ in range(500)]
    r = api.client.post(
        PATH, json={"leases": [{"key": k, "token": token, "ttl": 30} for k in keys]}
    )
    assert r.status_code == 200 and len(r.json()["results"]) == 500
    assert {x["status"] for x in r.json()["results"]} == {409}


def test_batches_need_the_service_key(live_server: LiveServer) -> None:
    import httpx

    r = httpx.post(
        live_server.url + PATH, json={"leases": []}, headers={"apikey": live_server.anon_key}
    )
    assert r.status_code == 403
