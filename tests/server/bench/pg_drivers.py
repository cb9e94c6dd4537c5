"""asyncpg vs psycopg 3 for the store's acquire + release transactions (docs/server.md).

    python -m tests.server.bench.pg_drivers [postgresql://postgres@127.0.0.1:5432/postgres]

Creates a scratch database, runs the same statement sequence the PostgreSQL store runs for an
acquisition and a release (row lock, idempotency check, update, idempotency insert), one
connection per driver, in alternating rounds because this machine is noisy; prints cycles/s
and the median ratio of paired rounds.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psycopg

SECONDS = 0.7
ROUNDS = 10

SCHEMA = [
    "CREATE TABLE locks (project_id bigint, key text, last_fence bigint NOT NULL, token text,"
    " token_text text, expires_at timestamptz, PRIMARY KEY (project_id, key))",
    "CREATE TABLE idempotency (project_id bigint, request_id text, fingerprint text,"
    " status int, body text, created_at timestamptz DEFAULT now(),"
    " PRIMARY KEY (project_id, request_id))",
    "INSERT INTO locks VALUES (1, 'k', 0, NULL, NULL, NULL)",
]
# The store's statement shapes (volcano_server/storage/_postgres.py): lock the row and read the
# request id's record in one statement, then update the row and record the answer in another.
LOCK = (
    "SELECT last_fence, token, token_text, expires_at, clock_timestamp(),"
    " (SELECT json_build_array(fingerprint, status, body)::text FROM idempotency"
    " WHERE project_id = 1 AND request_id = {0})"
    " FROM locks WHERE project_id = 1 AND key = 'k' FOR UPDATE"
)
WRITE = (
    "WITH u AS (UPDATE locks SET last_fence = {0}, token = {1}, token_text = {2},"
    " expires_at = {3} WHERE project_id = 1 AND key = 'k')"
    " INSERT INTO idempotency (project_id, request_id, fingerprint, status, body)"
    " VALUES (1, {4}, 'f', 200, {5}) ON CONFLICT DO NOTHING RETURNING 1"
)
BODY = json.dumps({"key": "k", "token": str(uuid.uuid4()), "fencing_token": 1, "expires_at": "x"})


async def bench_asyncpg(url: str) -> float:
    conn = await asyncpg.connect(url)
    lock, write = LOCK.format("$1"), WRITE.format("$1", "$2", "$3", "$4", "$5", "$6")
    n, deadline = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < deadline:
        for acquire in (True, False):
            token = str(uuid.uuid4()) if acquire else None
            async with conn.transaction():
                row = await conn.fetchrow(lock, str(uuid.uuid4()))
                exp = row[4] if acquire else None
                await conn.fetchval(
                    write, row[0] + acquire, token, token, exp, str(uuid.uuid4()), BODY
                )
        n += 1
    await conn.close()
    return n / SECONDS


async def bench_psycopg(url: str) -> float:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=False)
    lock, write = LOCK.format("%s"), WRITE.format(*["%s"] * 6)
    n, deadline = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < deadline:
        for acquire in (True, False):
            token = str(uuid.uuid4()) if acquire else None
            async with conn.transaction():
                cur = await conn.execute(lock, (str(uuid.uuid4()),))  # type: ignore[arg-type]
                row = await cur.fetchone()
                assert row is not None
                exp = row[4] if acquire else None
                args = (row[0] + acquire, token, token, exp, str(uuid.uuid4()), BODY)
                await (await conn.execute(write, args)).fetchone()  # type: ignore[arg-type]
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
            print(f"{driver:8} median {statistics.median(rates):7.0f} cycles/s")
        # Paired rounds ran back to back, so their ratio cancels most of the machine's drift.
        ratios = [a / p for a, p in zip(results["asyncpg"], results["psycopg"], strict=True)]
        print(
            f"asyncpg / psycopg: median {statistics.median(ratios):.2f}"
            f" (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


if __name__ == "__main__":
    import uvloop

    default = "postgresql://postgres@127.0.0.1:5432/postgres"
    uvloop.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
