"""Malformed input never gets a 500 and never changes anything (both backends)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server._api import Api, lock_path, new_key, new_token, raw_request


@pytest.fixture
def api(live_server):  # type: ignore[no-untyped-def]
    with Api.of(live_server) as api:
        yield api


def _error(r: httpx.Response, status: int, code: str) -> dict:  # type: ignore[type-arg]
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == r.headers["x-request-id"]
    assert isinstance(error["message"], str) and error["message"]
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "ttl", [True, False, 5.5, 30.0, "30", 4, 0, -5, 7_776_001, None, [30], {"s": 30}, 10**30]
)
def test_bad_ttl_is_422_and_changes_nothing(api: Api, ttl: object) -> None:
    key, token = new_key(), new_token()
    _error(api.acquire(key, token, ttl=ttl), 422, "validation_failed")
    assert api.get(key).json()["fencing_token"] is None
    # Same for renew, on a held lease: the lease stays as it was.
    lease = api.acquire(key, token).json()
    _error(api.renew(key, token, ttl=ttl), 422, "validation_failed")
    assert api.get(key).json()["expires_at"] == lease["expires_at"]


@pytest.mark.parametrize("ttl", [5, 7_776_000])
def test_ttl_bounds_are_inclusive(api: Api, ttl: int) -> None:
    assert api.acquire(new_key(), new_token(), ttl=ttl).status_code == 200


@pytest.mark.parametrize(
    "token",
    ["", "not-a-uuid", "0" * 32, "{12345678-1234-1234-1234-123456789abc}",
     "12345678-1234-1234-1234-123456789abcd", "1234567g-1234-1234-1234-123456789abc",
     "12345678123412341234123456789abc", 12345, None, True, ["x"],
     "\u0661" * 8 + "-1234-1234-1234-123456789abc"],
)  # fmt: skip
def test_bad_token_is_422(api: Api, token: object) -> None:
    key = new_key()
    for action in ("acquire", "renew", "release"):
        r = api.post(key, action, {"token": token, "ttl": 30})
        _error(r, 422, "validation_failed")
    assert api.get(key).json()["fencing_token"] is None


@pytest.mark.parametrize("field", ["token", "ttl"])
def test_missing_field_is_422(api: Api, field: str) -> None:
    body = {"token": new_token(), "ttl": 30}
    del body[field]
    _error(api.post(new_key(), "acquire", body), 422, "validation_failed")


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"not json", b"\xff\xfe", b"[1, 2]", b"null", b"42", b'"text"', b"[]",
     b'{"token": "x"', b"[" * 3000],
)  # fmt: skip
def test_malformed_body_is_400(api: Api, raw: bytes) -> None:
    key = new_key()
    r = api.client.post(
        lock_path(key, "acquire"), content=raw, headers={"content-type": "application/json"}
    )
    _error(r, 400, "malformed_request")
    assert api.get(key).json()["fencing_token"] is None


def test_body_over_4096_bytes_is_413(api: Api) -> None:
    key = new_key()
    body = {"token": new_token(), "ttl": 30, "pad": "x" * 5000}
    _error(api.post(key, "acquire", body), 413, "payload_too_large")
    # Chunked (no content-length) is bounded as well.
    raw = json.dumps(body).encode()
    r = api.client.post(lock_path(key, "acquire"), content=iter([raw[:3000], raw[3000:]]))
    _error(r, 413, "payload_too_large")
    assert api.get(key).json()["fencing_token"] is None


def test_body_of_exactly_4096_bytes_is_accepted(api: Api) -> None:
    body = {"token": new_token(), "ttl": 30, "pad": ""}
    body["pad"] = "x" * (4096 - len(json.dumps(body).encode()))
    raw = json.dumps(body).encode()
    assert len(raw) == 4096
    assert api.client.post(lock_path(new_key(), "acquire"), content=raw).status_code == 200


def test_unknown_fields_are_ignored(api: Api) -> None:
    key, token = new_key(), new_token()
    r = api.post(key, "acquire", {"token": token, "ttl": 30, "future": {"x": [1]}, "ttl2": "a"})
    assert r.status_code == 200
    assert api.post(key, "release", {"token": token, "ttl": "ignored"}).json()["released"] is True


@pytest.mark.parametrize(
    "raw_key", [".", "..", "%2E", "%2E%2E", "a%20b", "a%25b", "k" * 256, "%C3%A9", "a%00", "%FF",
                "a%3Fb", "a%23b", "a%5Cb", "a%2Bb", "%2F" * 256],
)  # fmt: skip
def test_bad_key_is_422(live_server, raw_key: str) -> None:  # type: ignore[no-untyped-def]
    # Sent raw (already encoded) so that nothing on the client side normalises it.
    for method, path in (
        ("GET", f"/locks/v1/locks/{raw_key}"),
        ("POST", f"/locks/v1/locks/{raw_key}/acquire"),
        ("POST", f"/locks/v1/locks/{raw_key}/force-release"),
    ):
        body = json.dumps({"token": new_token(), "ttl": 30}).encode()
        r = raw_request(live_server.url, method, path, body=body, headers=live_server.headers)
        _error(r, 422, "validation_failed")  # type: ignore[arg-type]


def test_empty_key_segment(api: Api) -> None:
    _error(api.client.post("/locks/v1/locks//acquire", json={}), 422, "validation_failed")
    _error(api.client.get("/locks/v1/locks/"), 404, "not_found")
    # /locks/v1/locks itself is the list route (tests/server/test_list.py); POST is not.
    _error(api.client.post("/locks/v1/locks", json={}), 405, "method_not_allowed")
    _error(api.client.get("/health/"), 404, "not_found")


@pytest.mark.parametrize("request_id", ["nope", "", "12345678-1234-1234-1234-12345678", "😀"])
def test_bad_request_id_is_422(api: Api, request_id: str) -> None:
    key = new_key()
    r = api.client.post(
        lock_path(key, "acquire"),
        json={"token": new_token(), "ttl": 30},
        headers={"X-Request-Id": request_id.encode()},  # type: ignore[dict-item]
    )
    error = _error(r, 422, "validation_failed")
    assert error["request_id"] != request_id  # a fresh one is assigned and echoed
    assert api.get(key).json()["fencing_token"] is None


def test_request_id_is_echoed_as_sent_or_assigned(api: Api) -> None:
    rid = new_token().upper()
    r = api.get(new_key(), request_id=rid)
    assert r.headers["x-request-id"] == rid
    r = api.client.get("/health")
    assert len(r.headers["x-request-id"]) == 36
    r = api.client.get("/nowhere", headers={"X-Request-Id": rid})
    assert _error(r, 404, "not_found")["request_id"] == rid


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/nowhere", 404, "not_found"),
        ("GET", "/locks/v1/locks/k/unknown", 404, "not_found"),
        ("GET", "/locks/v1/locks/k/acquire/more", 404, "not_found"),
        ("POST", "/locks/v1/other", 404, "not_found"),
        ("GET", "/locks/v1/locks/k/acquire", 405, "method_not_allowed"),
        ("DELETE", "/locks/v1/locks/k", 405, "method_not_allowed"),
        ("POST", "/locks/v1/locks/k", 405, "method_not_allowed"),
        ("PUT", "/locks/v1/locks/k/release", 405, "method_not_allowed"),
        ("POST", "/health", 405, "method_not_allowed"),
    ],
)
def test_unknown_routes_and_methods_are_json(
    api: Api, method: str, path: str, status: int, code: str
) -> None:
    _error(api.client.request(method, path), status, code)


def test_405_names_allowed_methods(api: Api) -> None:
    assert api.client.delete("/locks/v1/locks/k").headers["allow"] == "GET, HEAD"
    assert api.client.get("/locks/v1/locks/k/renew").headers["allow"] == "POST"


def test_force_release_ignores_any_body(api: Api) -> None:
    key = new_key()
    api.acquire(key, new_token())
    r = api.client.post(lock_path(key, "force-release"), content=b"garbage")
    assert r.status_code == 200 and r.json()["removed"] is True


def test_health_and_ready(api: Api) -> None:
    assert api.client.get("/health").json() == {"status": "ok"}
    r = api.client.get("/ready")
    assert r.status_code == 200 and r.json() == {"status": "ready"}
