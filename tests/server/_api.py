"""A thin raw-HTTP helper over httpx for server tests: the exact wire, no SDK in between."""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["Api", "RawResponse", "lock_path", "new_key", "new_token", "raw_request", "stable"]


def stable(body: dict[str, object]) -> dict[str, object]:
    """A lease body without `expires_in_ms`, which every answer (replays too) computes afresh."""
    return {k: v for k, v in body.items() if k != "expires_in_ms"}


def new_token() -> str:
    return str(uuid.uuid4())


def new_key(prefix: str = "k") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def lock_path(key: str, action: str | None = None) -> str:
    path = "/locks/v1/locks/" + quote(key, safe="")
    return path + ("/" + action if action else "")


class Api:
    def __init__(
        self, url: str, anon_key: str | None, service_key: str | None, *, timeout: float = 10.0
    ) -> None:
        headers = {}
        if anon_key is not None:
            headers["apikey"] = anon_key
        if service_key is not None:
            headers["Authorization"] = f"Bearer {service_key}"
        self.client = httpx.Client(base_url=url, headers=headers, timeout=timeout)

    @classmethod
    def of(cls, server: Any) -> Api:
        return cls(server.url, server.anon_key, server.service_key)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _headers(self, request_id: str | None) -> dict[str, str]:
        return {"X-Request-Id": request_id} if request_id else {}

    def post(
        self, key: str, action: str, body: Any = None, *, request_id: str | None = None
    ) -> httpx.Response:
        return self.client.post(
            lock_path(key, action), json=body, headers=self._headers(request_id)
        )

    def acquire(
        self, key: str, token: str, ttl: Any = 30, *, request_id: str | None = None
    ) -> httpx.Response:
        return self.post(key, "acquire", {"token": token, "ttl": ttl}, request_id=request_id)

    def renew(
        self, key: str, token: str, ttl: Any = 30, *, request_id: str | None = None
    ) -> httpx.Response:
        return self.post(key, "renew", {"token": token, "ttl": ttl}, request_id=request_id)

    def release(self, key: str, token: str, *, request_id: str | None = None) -> httpx.Response:
        return self.post(key, "release", {"token": token}, request_id=request_id)

    def force_release(self, key: str, *, request_id: str | None = None) -> httpx.Response:
        return self.client.post(lock_path(key, "force-release"), headers=self._headers(request_id))

    def get(self, key: str, *, request_id: str | None = None) -> httpx.Response:
        return self.client.get(lock_path(key), headers=self._headers(request_id))


class RawResponse:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code = status
        self.headers = headers
        self.content = body
        self.text = body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


def raw_request(
    url: str,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> RawResponse:
    """Send `path` byte for byte: http.client neither resolves `.` segments nor re-encodes."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return RawResponse(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()
