"""DESIGN.md section 11: (project, request id) -> (fingerprint, response) for mutations."""

from __future__ import annotations

import pytest

from tests.server._api import Api, new_key, new_token, stable


@pytest.fixture
def api(live_server):  # type: ignore[no-untyped-def]
    with Api.of(live_server) as api:
        yield api


def test_repeated_acquire_replays_even_after_the_state_moved_on(api: Api) -> None:
    key, token, rid = new_key(), new_token(), new_token()
    first = api.acquire(key, token, request_id=rid)
    assert first.status_code == 200
    assert api.release(key, token).json()["released"] is True
    other = new_token()
    assert api.acquire(key, other).status_code == 200
    again = api.acquire(key, token, request_id=rid)
    assert again.status_code == 200
    assert stable(again.json()) == stable(first.json())
    assert again.headers["x-request-id"] == rid
    # The replay changed nothing: the other owner still holds the lock.
    assert api.release(key, other).json()["released"] is True


def test_stored_conflict_is_replayed(api: Api) -> None:
    key, owner, loser, rid = new_key(), new_token(), new_token(), new_token()
    held = api.acquire(key, owner).json()
    conflict = api.acquire(key, loser, request_id=rid)
    assert conflict.status_code == 409
    api.release(key, owner)
    again = api.acquire(key, loser, request_id=rid)
    assert again.status_code == 409
    assert again.json() == conflict.json()
    assert again.json()["error"]["expires_at"] == held["expires_at"]
    assert api.get(key).json()["held"] is False


@pytest.mark.parametrize(
    "change",
    ["key", "token", "ttl", "operation"],
)
def test_different_fingerprint_same_request_id_is_422(api: Api, change: str) -> None:
    key, token, rid = new_key(), new_token(), new_token()
    assert api.acquire(key, token, ttl=30, request_id=rid).status_code == 200
    if change == "key":
        r = api.acquire(new_key(), token, ttl=30, request_id=rid)
    elif change == "token":
        r = api.acquire(key, new_token(), ttl=30, request_id=rid)
    elif change == "ttl":
        r = api.acquire(key, token, ttl=31, request_id=rid)
    else:
        r = api.renew(key, token, ttl=30, request_id=rid)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"
    assert r.json()["error"]["request_id"] == rid


def test_every_mutation_is_deduplicated(api: Api) -> None:
    key, token = new_key(), new_token()
    api.acquire(key, token)
    rid = new_token()
    renewed = api.renew(key, token, ttl=60, request_id=rid)
    assert stable(api.renew(key, token, ttl=60, request_id=rid).json()) == stable(renewed.json())
    rid = new_token()
    assert api.release(key, token, request_id=rid).json()["released"] is True
    assert api.release(key, token, request_id=rid).json()["released"] is True  # replayed
    assert api.release(key, token).json()["released"] is False  # fresh: nothing to free
    api.acquire(key, new_token())
    rid = new_token()
    assert api.force_release(key, request_id=rid).json()["removed"] is True
    assert api.force_release(key, request_id=rid).json()["removed"] is True  # replayed
    assert api.force_release(key).json()["removed"] is False


def test_request_id_spelling_is_one_id_and_token_spelling_one_token(api: Api) -> None:
    key, token, rid = new_key(), new_token(), new_token()
    first = api.acquire(key, token, request_id=rid)
    again = api.acquire(key, token.upper(), request_id=rid.upper())
    assert again.status_code == 200 and stable(again.json()) == stable(first.json())
    assert again.headers["x-request-id"] == rid.upper()


def test_request_ids_are_scoped_per_project(live_server, api: Api) -> None:  # type: ignore[no-untyped-def]
    rid, key = new_token(), new_key()
    assert api.acquire(key, new_token(), request_id=rid).status_code == 200
    with Api(live_server.url, *live_server.new_project("idem")) as other:
        r = other.acquire(new_key(), new_token(), request_id=rid)
        assert r.status_code == 200


def test_without_request_id_nothing_is_deduplicated(api: Api) -> None:
    key, token = new_key(), new_token()
    assert api.acquire(key, token).status_code == 200
    assert api.release(key, token).json()["released"] is True
    assert api.release(key, token).json()["released"] is False


def test_failed_validation_is_not_stored(api: Api) -> None:
    key, token, rid = new_key(), new_token(), new_token()
    assert api.acquire(key, token, ttl=1, request_id=rid).status_code == 422
    assert api.acquire(key, token, ttl=30, request_id=rid).status_code == 200


def test_get_is_not_deduplicated(api: Api) -> None:
    key, rid = new_key(), new_token()
    assert api.get(key, request_id=rid).json()["held"] is False
    assert api.acquire(key, new_token(), request_id=rid).status_code == 200
    assert api.get(key, request_id=rid).json()["held"] is True
