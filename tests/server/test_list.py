"""GET /locks/v1/locks: held locks only, key order, prefix, pages, validation (both backends)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import LiveServer
from tests.server._api import Api, new_key, new_token


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[Api]:
    with Api.of(live_server) as api:
        yield api


def _list(server: LiveServer, **params: object) -> httpx.Response:
    return httpx.get(server.url + "/locks/v1/locks", params=params, headers=server.headers)


def test_lists_held_locks_by_prefix_in_key_order_a_page_at_a_time(
    live_server: LiveServer, api: Api
) -> None:
    root = new_key("list") + "/"
    owners = [new_token() for _ in range(5)]
    for name, owner in zip(["b", "a", "c:1", "c.0", "d"], owners, strict=True):
        api.acquire(root + name, owner)
    token = new_token()
    api.acquire(root + "free", token)
    api.release(root + "free", token)  # released: not listed
    api.acquire(new_key("elsewhere"), new_token())  # another prefix
    keys, after, pages = [], "", 0
    while True:
        r = _list(live_server, prefix=root, after=after, limit=2)
        assert r.status_code == 200, r.text
        body = r.json()
        pages += 1
        keys += [item["key"] for item in body["locks"]]
        assert all(item["held"] and item["fencing_token"] >= 1 for item in body["locks"])
        assert not any(owner in r.text for owner in owners)
        if body["next_after"] is None:
            break
        after = body["next_after"]
    assert keys == sorted(root + n for n in ["a", "b", "c.0", "c:1", "d"])  # bytewise order
    assert pages == 3


def test_expired_and_other_projects_locks_are_not_listed(live_server: LiveServer) -> None:
    anon, service = live_server.new_project("list-other")
    other = httpx.Client(
        base_url=live_server.url,
        headers={"apikey": anon, "Authorization": f"Bearer {service}"},
    )
    key = new_key("mine")
    other.post(f"/locks/v1/locks/{key}/acquire", json={"token": new_token(), "ttl": 30})
    body = _list(live_server, prefix=key).json()
    assert body == {"locks": [], "next_after": None}
    listed = other.get("/locks/v1/locks", params={"prefix": key}).json()["locks"]
    assert [item["key"] for item in listed] == [key]
    other.close()


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 1001},
        {"limit": "ten"},
        {"limit": "²"},
        {"prefix": "a b"},
        {"after": "%"},
        {"prefix": "x" * 256},
    ],
)
def test_bad_queries_get_422(live_server: LiveServer, params: dict[str, object]) -> None:
    r = _list(live_server, **params)
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_failed"


def test_listing_needs_the_service_key(live_server: LiveServer) -> None:
    r = httpx.get(live_server.url + "/locks/v1/locks", headers={"apikey": live_server.anon_key})
    assert r.status_code == 403
