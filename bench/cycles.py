"""Acquire+release cycles through the SDK and through raw HTTP clients.

The raw clients send byte-for-byte the same two requests the SDK sends (same headers, same JSON
bodies, a fresh request id each), so ``SDK / raw httpx`` is the SDK's own overhead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import uuid
from collections.abc import Awaitable, Callable

import httpx

from volcano_sdk import AsyncVolcanoClient, VolcanoClient

from ._util import Result, Setup, arun_tasks, run_threads
from .servers import Volcano

TTL = 30
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


def _headers(v: Volcano | None) -> dict[str, str]:
    anon = v.anon_key if v else "anon"
    service = v.service_key if v else "service"
    return {"apikey": anon, "Authorization": f"Bearer {service}"}


def sdk_sync_setup(key: str, v: Volcano, name: str = "SDK sync, 1 thread") -> Setup:
    client = VolcanoClient(v.anon_key, v.service_key, v.url)
    locks = client.locks
    lock_key = f"sdk-{key}"

    def cycle() -> None:
        lease = locks.acquire(lock_key, TTL)
        locks.release(lock_key, lease)

    return Setup(key, name, v.backend, cycle, client.close)


def raw_httpx_setup(key: str, url: str, v: Volcano | None, group: str) -> Setup:
    """The SDK's two requests with a bare ``httpx.Client``; ``v=None`` targets the no-op."""
    http = httpx.Client(base_url=url, headers=_headers(v), timeout=TIMEOUT)
    cycle = _raw_cycle(http, f"raw-{key}")
    return Setup(key, "raw httpx sync, 1 thread", group, cycle, http.close)


def _raw_cycle(http: httpx.Client, key: str) -> Callable[[], None]:
    """What a user of bare httpx would write: a fresh token per cycle, a fresh request id
    per request, JSON bodies encoded by httpx, as the SDK does."""

    def cycle() -> None:
        token = str(uuid.uuid4())
        for action, body in (
            ("acquire", {"token": token, "ttl": TTL}),
            ("release", {"token": token}),
        ):
            r = http.post(
                f"/locks/v1/locks/{key}/{action}",
                json=body,
                headers={"X-Request-Id": str(uuid.uuid4())},
            )
            if r.status_code != 200:
                raise RuntimeError(f"{action}: HTTP {r.status_code}")
            r.json()

    return cycle


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
        name = f"SDK async, {tasks} task{'s' * (tasks > 1)}{PROTO_LABEL}"
        return Result(name, v.backend, skipped="aiohttp not installed (pip install aiohttp)")
    return sdk_async(v, tasks, seconds, AiohttpTransport, PROTO_LABEL)


SNIFFIO_LABEL = ", sniffio import failure cached (prototype)"


def sdk_async_sniffio(v: Volcano, tasks: int, seconds: float) -> Result:
    """PROTOTYPE: httpcore calls ``import sniffio`` on every lock it takes; without sniffio
    installed each call is a failed import that rescans sys.path.  ``sys.modules["sniffio"] =
    None`` makes that import fail at once, as an installed sniffio would make it succeed."""
    name = f"SDK async, {tasks} task{'s' * (tasks > 1)}{SNIFFIO_LABEL}"
    if importlib.util.find_spec("sniffio") is not None:
        return Result(name, v.backend, skipped="sniffio is installed: nothing to prototype")
    sys.modules["sniffio"] = None  # type: ignore[assignment]
    try:
        return sdk_async(v, tasks, seconds, label=SNIFFIO_LABEL)
    finally:
        del sys.modules["sniffio"]


def _bodies(token: str) -> tuple[bytes, bytes]:
    return (
        json.dumps({"token": token, "ttl": TTL}).encode(),
        json.dumps({"token": token}).encode(),
    )


def raw_httpx_sync(url: str, v: Volcano | None, seconds: float, name: str, group: str) -> Result:
    with httpx.Client(base_url=url, headers=_headers(v), timeout=TIMEOUT) as http:
        return run_threads(name, group, lambda i: _raw_cycle(http, f"raw-sync-{i}"), 1, seconds)


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

            async def cycle() -> None:
                acquire_body, release_body = _bodies(str(uuid.uuid4()))
                await post(f"/locks/v1/locks/{key}/acquire", acquire_body)
                await post(f"/locks/v1/locks/{key}/release", release_body)

            return cycle

        try:
            name = f"raw {client} async, {tasks} tasks"
            return await arun_tasks(name, group, make, tasks, seconds)
        finally:
            await close()

    return asyncio.run(main())


def _mock_transport() -> httpx.MockTransport:
    """Answers acquire and release in-process, so a cycle costs only client CPU."""

    def handle(request: httpx.Request) -> httpx.Response:
        key = request.url.raw_path.decode().split("/")[4]
        if request.url.path.endswith("/acquire"):
            token = json.loads(request.content)["token"]
            body = {
                "key": key,
                "token": token,
                "expires_at": "2030-01-01T00:00:00.000000Z",
                "fencing_token": 7,
            }
        else:
            body = {"key": key, "released": True}
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handle)


def mock_setups() -> list[Setup]:
    """The SDK and raw httpx over the same in-process transport: their client CPU per cycle."""
    group = "client CPU, in-process mock transport"
    sdk = VolcanoClient("anon", "service", "http://mock", transport=_mock_transport())
    locks = sdk.locks

    def sdk_cycle() -> None:
        lease = locks.acquire("mock", TTL)
        locks.release("mock", lease)

    raw = httpx.Client(
        base_url="http://mock", headers=_headers(None), timeout=TIMEOUT, transport=_mock_transport()
    )
    return [
        Setup("mock.sdk_sync", "SDK sync, 1 thread", group, sdk_cycle, sdk.close),
        Setup(
            "mock.raw_sync", "raw httpx sync, 1 thread", group, _raw_cycle(raw, "mock"), raw.close
        ),
    ]
