"""Credentials: the anon key names the project, the service key must belong to the same one.

Keys are random (`secrets.token_urlsafe(32)`, 256 bits) and stored only as SHA-256 hashes; a
plain hash suffices because the input has full entropy (no dictionary to attack).  They are
looked up by hash and the stored hash is compared with `hmac.compare_digest`.

Successful lookups are cached in memory for `cache_seconds` (default 2 s) to spare the database
one round trip per request; a revoked service key is therefore refused at most that long after
rotation.  Failures are never cached.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from starlette.datastructures import Headers

from ._errors import Forbidden, Unauthorized
from .storage import Store

__all__ = ["ANON_PREFIX", "SERVICE_PREFIX", "Authenticator", "hash_key", "new_key"]

ANON_PREFIX = "vla_"
SERVICE_PREFIX = "vls_"
_CACHE_MAX = 4096


def new_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


class Authenticator:
    def __init__(self, store: Store, *, cache_seconds: float = 2.0) -> None:
        self._store = store
        self._ttl = cache_seconds
        self._cache: dict[tuple[str, str], tuple[float, int]] = {}

    async def authenticate(self, headers: Headers) -> int:
        """The project id both credentials agree on, or Unauthorized / Forbidden."""
        anon = headers.get("apikey")
        if not anon:
            raise Unauthorized("missing apikey header (the project's anon key)")
        service: str | None = None
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, credential = authorization.partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential:
                raise Unauthorized("the Authorization header must be 'Bearer <service key>'")
            service = credential
        anon_hash = hash_key(anon)
        service_hash = None if service is None else hash_key(service)

        if service_hash is not None and self._ttl > 0:
            hit = self._cache.get((anon_hash, service_hash))
            if hit is not None and hit[0] > time.monotonic():
                return hit[1]

        found = await self._store.lookup_keys(anon_hash, service_hash)
        if found.anon_project is None or not hmac.compare_digest(found.anon_hash or "", anon_hash):
            raise Unauthorized("unknown anon key")
        if service_hash is None:
            raise Forbidden("lock operations need the service key (Authorization: Bearer ...)")
        if found.service_project is None or not hmac.compare_digest(
            found.service_hash or "", service_hash
        ):
            raise Unauthorized("unknown or revoked service key")
        if found.service_project != found.anon_project:
            raise Forbidden("the service key belongs to another project than the anon key")

        if self._ttl > 0:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[(anon_hash, service_hash)] = (
                time.monotonic() + self._ttl,
                found.anon_project,
            )
        return found.anon_project
