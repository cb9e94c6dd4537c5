"""DESIGN.md sections 5-10 over HTTP, on both backends (live servers, real databases)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.server._api import Api, new_key, new_token, stable
from tests.server._db import backdate, lock_row


@pytest.fixture
def api(live_server) -> Api:  # type: ignore[no-untyped-def]
    with Api.of(live_server) as api:
        yield api  # type: ignore[misc]


def _expiry(response) -> datetime:  # type: ignore[no-untyped-def]
    return datetime.fromisoformat(response.json()["expires_at"])


def test_acquire_free_key_starts_first_period(api: Api) -> None:
    key, token = new_key(), new_token()
    before = datetime.now(UTC)
    r = api.acquire(key, token, ttl=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["key"] == key
    assert body["token"] == token
    assert body["fencing_token"] == 1
    expires = _expiry(r)
    assert expires.utcoffset() == timedelta(0)
    # db_now + ttl; the database runs on this machine, so its clock is ours (within slack).
    assert before + timedelta(seconds=29) < expires < before + timedelta(seconds=32)
    assert set(body) == {"key", "token", "fencing_token", "expires_at", "expires_in_ms"}


def test_acquire_held_by_other_conflicts_and_reveals_expiry_not_token(api: Api) -> None:
    key, owner, other = new_key(), new_token(), new_token()
    lease = api.acquire(key, owner).json()
    r = api.acquire(key, other)
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "lock_held"
    assert error["expires_at"] == lease["expires_at"]
    assert owner not in r.text and owner.upper() not in r.text


def test_acquire_same_token_returns_current_lease_unchanged(api: Api) -> None:
    key, token = new_key(), new_token()
    first = api.acquire(key, token, ttl=30).json()
    again = api.acquire(key, token, ttl=600)
    assert again.status_code == 200
    assert stable(again.json()) == stable(first)  # the repeat's TTL is not applied
    assert again.json()["expires_in_ms"] <= first["expires_in_ms"] <= 30_000


def test_token_compared_by_uuid_value_and_received_spelling_echoed(api: Api) -> None:
    key = new_key()
    token = new_token().upper()
    first = api.acquire(key, token)
    assert first.json()["token"] == token
    again = api.acquire(key, token.lower())  # the same owner, spelled otherwise
    assert again.status_code == 200
    assert stable(again.json()) == {**stable(first.json()), "token": token.lower()}
    renewed = api.renew(key, token.lower(), ttl=40)
    assert renewed.status_code == 200
    assert renewed.json()["token"] == token.lower()  # DESIGN 4: the spelling it received
    assert api.release(key, token.lower()).json()["released"] is True


def test_fence_strictly_increases_across_every_kind_of_period_end(
    api: Api,
    live_server,  # type: ignore[no-untyped-def]
) -> None:
    key = new_key()
    fences = []
    t1 = new_token()
    fences.append(api.acquire(key, t1).json()["fencing_token"])
    api.release(key, t1)  # release
    t2 = new_token()
    fences.append(api.acquire(key, t2).json()["fencing_token"])
    api.force_release(key)  # force release
    t3 = new_token()
    fences.append(api.acquire(key, t3).json()["fencing_token"])
    backdate(live_server.database_url, key)  # expiry
    t4 = new_token()
    fences.append(api.acquire(key, t4).json()["fencing_token"])
    assert fences == sorted(set(fences)) and fences[0] == 1, fences


def test_renew_keeps_fence_and_extends_from_db_now(api: Api) -> None:
    key, token = new_key(), new_token()
    lease = api.acquire(key, token, ttl=10).json()
    r = api.renew(key, token, ttl=120)
    assert r.status_code == 200
    renewed = r.json()
    assert renewed["fencing_token"] == lease["fencing_token"]
    assert renewed["token"] == token
    assert datetime.fromisoformat(renewed["expires_at"]) > datetime.fromisoformat(
        lease["expires_at"]
    ) + timedelta(seconds=100)
    state = api.get(key).json()
    assert state["expires_at"] == renewed["expires_at"]


def test_renew_expired_is_lease_expired_and_never_resurrects(
    api: Api,
    live_server,  # type: ignore[no-untyped-def]
) -> None:
    key, token = new_key(), new_token()
    api.acquire(key, token)
    backdate(live_server.database_url, key)
    r = api.renew(key, token)
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "lease_expired"
    assert api.get(key).json()["held"] is False


def test_renew_not_holder(api: Api) -> None:
    key, owner = new_key(), new_token()
    r = api.renew(key, owner)  # never acquired
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_holder"
    api.acquire(key, owner)
    r = api.renew(key, new_token())
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_holder"
    api.release(key, owner)
    r = api.renew(key, owner)  # released: free
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_holder"


def test_release_rules(api: Api, live_server) -> None:  # type: ignore[no-untyped-def]
    key, owner, other = new_key(), new_token(), new_token()
    # Free: nothing to free.
    r = api.release(key, owner)
    assert r.status_code == 200 and r.json() == {"key": key, "released": False}
    api.acquire(key, owner)
    # Held by another token: 409 not_holder, lease untouched.
    r = api.release(key, other)
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_holder"
    assert api.get(key).json()["held"] is True
    # Holder, even after expiry: released.
    backdate(live_server.database_url, key)
    r = api.release(key, owner)
    assert r.status_code == 200 and r.json() == {"key": key, "released": True}
    assert api.release(key, owner).json()["released"] is False


def test_release_of_expired_lease_by_another_token_is_nothing_to_free(
    api: Api,
    live_server,  # type: ignore[no-untyped-def]
) -> None:
    key = new_key()
    api.acquire(key, new_token())
    backdate(live_server.database_url, key)
    r = api.release(key, new_token())
    assert r.status_code == 200 and r.json()["released"] is False


def test_get_reports_state_and_never_the_token(api: Api, live_server) -> None:  # type: ignore[no-untyped-def]
    key, token = new_key(), new_token()
    r = api.get(key)
    assert r.status_code == 200
    assert r.json() == {"key": key, "held": False, "expires_at": None, "fencing_token": None}
    lease = api.acquire(key, token).json()
    state = api.get(key).json()
    assert state == {
        "key": key,
        "held": True,
        "expires_at": lease["expires_at"],
        "fencing_token": lease["fencing_token"],
    }
    assert token not in api.get(key).text
    api.release(key, token)
    assert api.get(key).json() == {
        "key": key,
        "held": False,
        "expires_at": None,
        "fencing_token": lease["fencing_token"],
    }
    # Get acquires nothing: the key is still free for anyone.
    assert api.acquire(key, new_token()).status_code == 200


def test_get_reads_expired_lease_as_free(api: Api, live_server) -> None:  # type: ignore[no-untyped-def]
    key = new_key()
    fence = api.acquire(key, new_token()).json()["fencing_token"]
    backdate(live_server.database_url, key)
    assert api.get(key).json() == {
        "key": key,
        "held": False,
        "expires_at": None,
        "fencing_token": fence,
    }


def test_force_release(api: Api, live_server) -> None:  # type: ignore[no-untyped-def]
    key, owner = new_key(), new_token()
    r = api.force_release(key)
    assert r.status_code == 200 and r.json() == {"key": key, "removed": False}
    fence = api.acquire(key, owner).json()["fencing_token"]
    r = api.force_release(key)
    assert r.status_code == 200 and r.json() == {"key": key, "removed": True}
    assert api.get(key).json()["held"] is False
    # The old holder lost it: renew says so; the next owner gets a higher fence.
    assert api.renew(key, owner).json()["error"]["code"] == "not_holder"
    assert api.acquire(key, new_token()).json()["fencing_token"] > fence
    # An expired lease is cleared but does not count as removed.
    backdate(live_server.database_url, key)
    assert api.force_release(key).json()["removed"] is False


def test_acquire_after_expiry_gets_new_period(api: Api, live_server) -> None:  # type: ignore[no-untyped-def]
    key, old, new = new_key(), new_token(), new_token()
    first = api.acquire(key, old).json()
    backdate(live_server.database_url, key)
    r = api.acquire(key, new)
    assert r.status_code == 200
    assert r.json()["fencing_token"] == first["fencing_token"] + 1
    # The old owner's lease is gone for good.
    assert api.renew(key, old).json()["error"]["code"] == "not_holder"
    assert api.release(key, old).status_code == 409


def test_real_expiry_by_the_clock(api: Api) -> None:
    """One real TTL (the minimum, 5 s): no backdating, the database's clock alone."""
    key, token = new_key(), new_token()
    lease = api.acquire(key, token, ttl=5).json()
    deadline = time.monotonic() + 8
    while api.get(key).json()["held"] and time.monotonic() < deadline:
        time.sleep(0.25)
    assert api.get(key).json()["held"] is False
    assert api.renew(key, token).json()["error"]["code"] == "lease_expired"
    assert api.acquire(key, new_token()).json()["fencing_token"] == lease["fencing_token"] + 1


@pytest.mark.parametrize(
    "key",
    ["a", "a/b:c.d-e", "...", ".a", "..a", "a.", "x/acquire", "x/release/renew", "/", "//",
     "k" * 255, "A-Z_0-9:/.", "a..b", "./x", "../x"],
)  # fmt: skip
def test_every_valid_key_round_trips(api: Api, live_server, key: str) -> None:  # type: ignore[no-untyped-def]
    project = live_server.new_project("keys")  # a clean namespace: keys repeat across runs
    with Api(live_server.url, *project) as own:
        token = new_token()
        r = own.acquire(key, token)
        assert r.status_code == 200, r.text
        assert r.json()["key"] == key
        assert own.get(key).json()["key"] == key
        assert own.get(key).json()["held"] is True
        assert own.renew(key, token).json()["key"] == key
        assert own.release(key, token).json() == {"key": key, "released": True}
        assert own.force_release(key).json() == {"key": key, "removed": False}
    assert lock_row(live_server.database_url, key) is not None


def test_same_key_in_two_projects_is_two_locks(live_server) -> None:  # type: ignore[no-untyped-def]
    key = new_key()
    with Api.of(live_server) as a, Api(live_server.url, *live_server.new_project("b")) as b:
        ta, tb = new_token(), new_token()
        assert a.acquire(key, ta).json()["fencing_token"] == 1
        assert b.acquire(key, tb).json()["fencing_token"] == 1
        assert b.release(key, ta).status_code == 409  # a's token means nothing in b
        assert b.force_release(key).json()["removed"] is True
        assert a.get(key).json()["held"] is True
