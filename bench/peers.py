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

import httpx

from ._util import Result, Setup

GROUP = "peers"
TTL = 30


def skipped(name: str, why: str) -> Result:
    return Result(name, GROUP, skipped=why)


def redis_setup(key: str, url: str = "redis://127.0.0.1:6379/15") -> Setup | Result:
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
    lock = client.lock(f"volcano-bench-{uuid.uuid4()}", timeout=TTL)

    def cycle() -> None:
        if not lock.acquire(blocking=False):
            raise RuntimeError("held")
        lock.release()

    return Setup(key, name, GROUP, cycle, client.close, "no durability, no fencing token")


PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_leases (
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


def postgres_setup(key: str, database_url: str) -> Setup:
    import psycopg

    state = {"conn": psycopg.connect(database_url, autocommit=True)}
    state["conn"].execute(PG_SCHEMA)
    commit_mode = state["conn"].execute("SHOW synchronous_commit").fetchone()
    lock_key = f"pg-{key}"

    def cycle() -> None:
        conn = state["conn"]
        token = uuid.uuid4()
        try:
            row = conn.execute(PG_ACQUIRE, {"key": lock_key, "token": token, "ttl": TTL}).fetchone()
            if row is None:
                raise RuntimeError("held")
            conn.execute(PG_RELEASE, {"key": lock_key, "token": token})
        except psycopg.OperationalError:
            # Another session restarts PostgreSQL now and then: reconnect, count the error.
            if conn.closed or conn.broken:
                conn.close()
                state["conn"] = psycopg.connect(database_url, autocommit=True, connect_timeout=5)
            raise

    mode = commit_mode[0] if commit_mode else "?"
    note = f"UPSERT + UPDATE, fence kept; synchronous_commit={mode}"
    return Setup(
        key, "PostgreSQL lease table, psycopg", GROUP, cycle, lambda: state["conn"].close(), note
    )


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def etcd_setup(key: str, url: str) -> Setup:
    http = httpx.Client(base_url=url, timeout=httpx.Timeout(10.0, connect=5.0))
    lock_key = _b64(f"volcano-bench/{key}")
    owner = _b64("owner")

    def cycle() -> None:
        grant = http.post("/v3/lease/grant", json={"TTL": TTL}).raise_for_status().json()
        txn = http.post(
            "/v3/kv/txn",
            json={
                "compare": [{"key": lock_key, "target": "CREATE", "create_revision": "0"}],
                "success": [
                    {"request_put": {"key": lock_key, "value": owner, "lease": grant["ID"]}}
                ],
            },
        ).raise_for_status()
        if not txn.json().get("succeeded"):
            raise RuntimeError("held")
        http.post("/v3/kv/deleterange", json={"key": lock_key}).raise_for_status()

    note = "grant + txn + delete: 3 requests per cycle, the lease left to expire"
    return Setup(key, "etcd 3.4, JSON gateway", GROUP, cycle, http.close, note)
