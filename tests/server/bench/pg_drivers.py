"""asyncpg vs psycopg 3 for the store's acquire + release transactions (docs/server.md).

    python -m tests.server.bench.pg_drivers [postgresql://postgres@127.0.0.1:5432/postgres]

Creates a scratch database, runs the same statement sequence the PostgreSQL store runs for an
acquisition and a release (row lock, idempotency check, update, idempotency insert), one
connection per driver, in alternating rounds because this machine is noisy; prints cycles/s.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psycopg

SECONDS = 2.0
ROUNDS = 3

SCHEMA = [
    "CREATE TABLE locks (project_id bigint, key text, last_fence bigint NOT NULL, token text,"
    " token_text text, expires_at timestamptz, PRIMARY KEY (project_id, key))",
    "CREATE TABLE idempotency (project_id bigint, request_id text, fingerprint text,"
    " status int, body text, created_at timestamptz DEFAULT now(),"
    " PRIMARY KEY (project_id, request_id))",
    "INSERT INTO locks VALUES (1, 'k', 0, NULL, NULL, NULL)",
]
LOCK = (
    "SELECT last_fence, token, token_text, expires_at, clock_timestamp()"
    " FROM locks WHERE project_id = 1 AND key = 'k' FOR UPDATE"
)
IDEM = "SELECT fingerprint, status, body FROM idempotency WHERE project_id = 1 AND request_id = {}"
UPDATE = (
    "UPDATE locks SET last_fence = {0}, token = {1}, token_text = {1}, expires_at = {2}"
    " WHERE project_id = 1 AND key = 'k'"
)
STORE = (
    "INSERT INTO idempotency (project_id, request_id, fingerprint, status, body)"
    " VALUES (1, {0}, 'f', 200, {1}) ON CONFLICT DO NOTHING RETURNING 1"
)
BODY = json.dumps({"key": "k", "token": str(uuid.uuid4()), "fencing_token": 1, "expires_at": "x"})


async def bench_asyncpg(url: str) -> float:
    conn = await asyncpg.connect(url)
    ph = ["$1", "$2", "$3"]
    lock, idem = LOCK, IDEM.format(ph[0])
    update, store = UPDATE.format(*ph), STORE.format(ph[0], ph[1])
    n, deadline = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < deadline:
        for acquire in (True, False):
            token = str(uuid.uuid4()) if acquire else None
            async with conn.transaction():
                row = await conn.fetchrow(lock)
                await conn.fetchrow(idem, str(uuid.uuid4()))
                exp = row[4] if acquire else None
                await conn.execute(update, row[0] + acquire, token, exp)
                await conn.fetchval(store, str(uuid.uuid4()), BODY)
        n += 1
    await conn.close()
    return n / SECONDS


async def bench_psycopg(url: str) -> float:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=False, prepare_threshold=0)
    lock, idem = LOCK, IDEM.format("%s")
    update, store = UPDATE.format("%s", "%s", "%s"), STORE.format("%s", "%s")
    n, deadline = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < deadline:
        for acquire in (True, False):
            token = str(uuid.uuid4()) if acquire else None
            async with conn.transaction():
                row = await (await conn.execute(lock)).fetchone()
                assert row is not None
                await (await conn.execute(idem, (str(uuid.uuid4()),))).fetchone()
                exp = row[4] if acquire else None
                await conn.execute(update, (row[0] + acquire, token, token, exp))  # type: ignore[arg-type]
                await (await conn.execute(store, (str(uuid.uuid4()), BODY))).fetchone()
        n += 1
    await conn.close()
    return n / SECONDS


async def main(admin: str) -> None:
    name = f"volcano_bench_{uuid.uuid4().hex[:8]}"
    url = urlunsplit(urlsplit(admin)._replace(path="/" + name))
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    try:
        with psycopg.connect(url, autocommit=True) as c:
            for statement in SCHEMA:
                c.execute(statement)  # type: ignore[arg-type]
        results: dict[str, list[float]] = {"asyncpg": [], "psycopg": []}
        for _ in range(ROUNDS):
            results["asyncpg"].append(await bench_asyncpg(url))
            results["psycopg"].append(await bench_psycopg(url))
        for driver, rates in results.items():
            print(f"{driver:8} median {statistics.median(rates):7.0f} cycles/s  {rates}")
        ratio = statistics.median(results["asyncpg"]) / statistics.median(results["psycopg"])
        print(f"asyncpg / psycopg = {ratio:.2f}")
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


if __name__ == "__main__":
    import uvloop

    default = "postgresql://postgres@127.0.0.1:5432/postgres"
    uvloop.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
