"""End-to-end throughput: acquire + release cycles over HTTP against a real server.

    python -m tests.server.bench.server [--seconds 3] [--clients 16] [--postgres URL]

Starts `volcano-locks serve` on SQLite (and on PostgreSQL when reachable) with 1 and 2 workers
and drives it from a small keep-alive HTTP/1.1 client on asyncio (httpx's async client slows
down under concurrency here, see LIBRARY-NOTES.md).  Each client cycles on its own key, with a
request id on every call, as the SDK sends them.  Prints cycles/s (two requests per cycle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

from tests._server_process import ServerProcess, create_project


async def _call(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: str, body: bytes
) -> int:
    writer.write(
        (head + f"X-Request-Id: {uuid.uuid4()}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        + body
    )
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def _client(url: str, keys: tuple[str, str], seconds: float) -> int:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    key = f"bench-{uuid.uuid4().hex}"
    auth = f"Host: bench\r\napikey: {keys[0]}\r\nAuthorization: Bearer {keys[1]}\r\n"
    auth += "Content-Type: application/json\r\n"
    cycles, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        token = str(uuid.uuid4())
        head = f"POST /locks/v1/locks/{key}/acquire HTTP/1.1\r\n" + auth
        assert await _call(reader, writer, head, json.dumps({"token": token, "ttl": 30}).encode())
        head = f"POST /locks/v1/locks/{key}/release HTTP/1.1\r\n" + auth
        assert await _call(reader, writer, head, json.dumps({"token": token}).encode()) == 200
        cycles += 1
    writer.close()
    return cycles


async def _drive(url: str, keys: tuple[str, str], clients: int, seconds: float) -> float:
    counts = await asyncio.gather(*(_client(url, keys, seconds) for _ in range(clients)))
    return sum(counts) / seconds


def _measure(database_url: str, workers: int, clients: int, seconds: float) -> float:
    keys = create_project(database_url, f"bench-{uuid.uuid4().hex[:8]}")
    with ServerProcess(
        database_url, workers=workers, extra_args=("--no-access-log", "--log-level", "warning")
    ) as server:
        asyncio.run(_drive(server.url, keys, clients, 0.5))  # warm-up: pools, caches
        return asyncio.run(_drive(server.url, keys, clients, seconds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    databases = {"sqlite": f"sqlite:///{tempfile.mkdtemp()}/bench.db"}
    scratch = f"volcano_bench_{uuid.uuid4().hex[:8]}"
    try:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True, connect_timeout=3) as c:
            c.execute(f'CREATE DATABASE "{scratch}"')  # type: ignore[arg-type]
        databases["postgres"] = urlunsplit(urlsplit(args.postgres)._replace(path="/" + scratch))
    except Exception as exc:
        print(f"(PostgreSQL skipped: {exc})", file=sys.stderr)
    try:
        for backend, url in databases.items():
            for workers in (1, 2):
                rate = _measure(url, workers, args.clients, args.seconds)
                print(
                    f"{backend:8} workers={workers} clients={args.clients}:"
                    f" {rate:7.0f} acquire+release cycles/s"
                )
    finally:
        if "postgres" in databases:
            with psycopg.connect(args.postgres, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
