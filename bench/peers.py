"""The peers, each on one client thread like the SDK's headline figure.

- Redis: redis-py ``Lock`` (SET NX PX + a Lua release); no durability, no fencing token.
- PostgreSQL: a lease table used directly through psycopg in autocommit (synchronous commit):
  one UPSERT that takes a free or expired row and bumps its fence, one UPDATE that frees it,
  so it keeps a fencing counter like the service does.
- etcd 3.4: through its HTTP JSON gateway, the way an HTTP-only client uses it: lease grant,
  txn put-if-absent bound to the lease, delete (three requests per cycle).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable

import httpx

from ._util import Result, run_threads

GROUP = "peers"
TTL = 30


def skipped(name: str, why: str) -> Result:
    return Result(name, GROUP, skipped=why)


def redis_lock(seconds: float, url: str = "redis://127.0.0.1:6379/15") -> Result:
    name = "Redis, redis-py Lock"
    try:
        import redis
    except ImportError:
        return skipped(name, "redis-py not installed (pip install redis)")
    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        return skipped(name, f"no Redis at {url}: {type(exc).__name__}")

    def make(i: int) -> Callable[[], None]:
        lock = client.lock(f"volcano-bench-{uuid.uuid4()}", timeout=TTL)

        def cycle() -> None:
            if not lock.acquire(blocking=False):
                raise RuntimeError("held")
            lock.release()

        return cycle

    try:
        return run_threads(name, GROUP, make, 1, seconds)
    finally:
        client.close()


PG_SCHEMA = """
CREATE TABLE bench_leases (
    key text PRIMARY KEY,
    token uuid,
    fence bigint NOT NULL,
    expires_at timestamptz
)
"""
PG_ACQUIRE = """
INSERT INTO bench_leases AS l (key, token, fence, expires_at)
VALUES (%(key)s, %(token)s, 1, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (key) DO UPDATE
    SET token = excluded.token, fence = l.fence + 1, expires_at = excluded.expires_at
    WHERE l.token IS NULL OR l.expires_at <= now()
RETURNING fence
"""
PG_RELEASE = """
UPDATE bench_leases SET token = NULL, expires_at = NULL WHERE key = %(key)s AND token = %(token)s
"""


def postgres_table(database_url: str, seconds: float, *, create: bool = True) -> Result:
    import psycopg

    name = "PostgreSQL lease table, psycopg"
    if create:
        with psycopg.connect(database_url, autocommit=True) as setup:
            setup.execute(PG_SCHEMA)
    conn = psycopg.connect(database_url, autocommit=True)

    def make(i: int) -> Callable[[], None]:
        key = f"pg-{i}"

        def cycle() -> None:
            token = uuid.uuid4()
            row = conn.execute(PG_ACQUIRE, {"key": key, "token": token, "ttl": TTL}).fetchone()
            if row is None:
                raise RuntimeError("held")
            conn.execute(PG_RELEASE, {"key": key, "token": token})

        return cycle

    try:
        result = run_threads(name, GROUP, make, 1, seconds)
        result.note = "synchronous_commit=" + str(
            conn.execute("SHOW synchronous_commit").fetchone()[0]
        )
        return result
    finally:
        conn.close()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def etcd_gateway(url: str, seconds: float) -> Result:
    name = "etcd 3.4, JSON gateway"
    http = httpx.Client(base_url=url, timeout=httpx.Timeout(10.0, connect=5.0))

    def make(i: int) -> Callable[[], None]:
        key = _b64(f"volcano-bench/{i}")

        def cycle() -> None:
            grant = http.post("/v3/lease/grant", json={"TTL": TTL}).raise_for_status().json()
            txn = http.post(
                "/v3/kv/txn",
                json={
                    "compare": [{"key": key, "target": "CREATE", "create_revision": "0"}],
                    "success": [
                        {"request_put": {"key": key, "value": _b64("owner"), "lease": grant["ID"]}}
                    ],
                },
            ).raise_for_status()
            if not txn.json().get("succeeded"):
                raise RuntimeError("held")
            http.post("/v3/kv/deleterange", json={"key": key}).raise_for_status()

        return cycle

    try:
        result = run_threads(name, GROUP, make, 1, seconds)
        result.note = "3 requests per cycle; the lease is left to expire"
        return result
    finally:
        http.close()
