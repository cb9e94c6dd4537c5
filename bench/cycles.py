"""Acquire+release cycles through the SDK and through raw HTTP clients.

The raw clients send byte-for-byte the same two requests the SDK sends (same headers, same JSON
bodies, a fresh request id each), so ``SDK / raw httpx`` is the SDK's own overhead.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable

import httpx

from volcano_sdk import AsyncVolcanoClient, VolcanoClient

from ._util import Result, arun_tasks, run_threads
from .servers import Volcano

TTL = 30
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


def _headers(v: Volcano | None) -> dict[str, str]:
    anon = v.anon_key if v else "anon"
    service = v.service_key if v else "service"
    return {"apikey": anon, "Authorization": f"Bearer {service}"}


def sdk_sync(v: Volcano, threads: int, seconds: float) -> Result:
    with VolcanoClient(v.anon_key, v.service_key, v.url) as client:
        locks = client.locks

        def make(i: int) -> Callable[[], None]:
            key = f"sdk-sync-{threads}-{i}"

            def cycle() -> None:
                lease = locks.acquire(key, TTL)
                locks.release(key, lease)

            return cycle

        return run_threads(
            f"SDK sync, {threads} thread{'s' * (threads > 1)}", v.backend, make, threads, seconds
        )


def sdk_async(
    v: Volcano,
    tasks: int,
    seconds: float,
    transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
    label: str = "",
) -> Result:
    async def main() -> Result:
        async with AsyncVolcanoClient(
            v.anon_key, v.service_key, v.url, transport=transport() if transport else None
        ) as client:
            locks = client.locks

            def make(i: int) -> Callable[[], Awaitable[None]]:
                key = f"sdk-async-{tasks}-{abs(hash(label))}-{i}"

                async def cycle() -> None:
                    lease = await locks.acquire(key, TTL)
                    await locks.release(key, lease)

                return cycle

            name = f"SDK async, {tasks} task{'s' * (tasks > 1)}{label}"
            return await arun_tasks(name, v.backend, make, tasks, seconds)

    return asyncio.run(main())


PROTO_LABEL = ", aiohttp transport (prototype)"


def sdk_async_aiohttp(v: Volcano, tasks: int, seconds: float) -> Result:
    """The async SDK over the bench's aiohttp-backed httpx transport (a prototype)."""
    try:
        from .aiohttp_transport import AiohttpTransport
    except ImportError:
        name = f"SDK async, {tasks} tasks{PROTO_LABEL}"
        return Result(name, v.backend, skipped="aiohttp not installed (pip install aiohttp)")
    return sdk_async(v, tasks, seconds, AiohttpTransport, PROTO_LABEL)


def _bodies(token: str) -> tuple[bytes, bytes]:
    return (
        json.dumps({"token": token, "ttl": TTL}).encode(),
        json.dumps({"token": token}).encode(),
    )


def raw_httpx_sync(url: str, v: Volcano | None, seconds: float, name: str, group: str) -> Result:
    """The SDK's two requests with a bare ``httpx.Client``; ``v=None`` targets the no-op."""
    with httpx.Client(base_url=url, headers=_headers(v), timeout=TIMEOUT) as http:

        def make(i: int) -> Callable[[], None]:
            key = f"raw-sync-{i}"
            token = str(uuid.uuid4())
            acquire_body, release_body = _bodies(token)

            def cycle() -> None:
                for action, body in (("acquire", acquire_body), ("release", release_body)):
                    r = http.post(
                        f"/locks/v1/locks/{key}/{action}",
                        content=body,
                        headers={
                            "X-Request-Id": str(uuid.uuid4()),
                            "Content-Type": "application/json",
                        },
                    )
                    if r.status_code != 200:
                        raise RuntimeError(f"{action}: HTTP {r.status_code}")
                    r.json()

            return cycle

        return run_threads(name, group, make, 1, seconds)


def raw_async(
    url: str, v: Volcano | None, seconds: float, tasks: int, client: str, group: str
) -> Result:
    """Raw async cycles with httpx.AsyncClient or aiohttp, ``tasks`` concurrent tasks."""

    async def main() -> Result:
        headers = _headers(v) | {"Content-Type": "application/json"}
        if client == "aiohttp":
            import aiohttp

            session = aiohttp.ClientSession(
                base_url=url, headers=headers, connector=aiohttp.TCPConnector(limit=100)
            )

            async def post(path: str, body: bytes) -> None:
                async with session.post(
                    path, data=body, headers={"X-Request-Id": str(uuid.uuid4())}
                ) as r:
                    if r.status != 200:
                        raise RuntimeError(f"HTTP {r.status}")
                    await r.json()

            close: Callable[[], Awaitable[None]] = session.close
        else:
            http = httpx.AsyncClient(base_url=url, headers=headers, timeout=TIMEOUT)

            async def post(path: str, body: bytes) -> None:
                r = await http.post(path, content=body, headers={"X-Request-Id": str(uuid.uuid4())})
                if r.status_code != 200:
                    raise RuntimeError(f"HTTP {r.status_code}")
                r.json()

            close = http.aclose

        def make(i: int) -> Callable[[], Awaitable[None]]:
            key = f"raw-async-{client}-{i}"
            acquire_body, release_body = _bodies(str(uuid.uuid4()))

            async def cycle() -> None:
                await post(f"/locks/v1/locks/{key}/acquire", acquire_body)
                await post(f"/locks/v1/locks/{key}/release", release_body)

            return cycle

        try:
            name = f"raw {client} async, {tasks} tasks"
            return await arun_tasks(name, group, make, tasks, seconds)
        finally:
            await close()

    return asyncio.run(main())
