"""An in-process reference server for testing your own lock-loss handling.

    from volcano_sdk.testing import LockServer

    def test_job_stops_when_the_lock_is_lost():
        with LockServer() as server, server.client() as client:
            with pytest.raises(LockLostError):
                with client.locks.with_lock("daily-report", ttl=5) as guard:
                    server.take_over("daily-report")     # another worker holds it now
                    assert guard.wait_lost(timeout=5)    # noticed by the next renewal
                    ...

``LockServer`` runs the real ``volcano_server`` app (so it needs ``volcano-sdk[server]``) on a
SQLite file in a temporary folder, inside this process: clients reach it through a transport,
with no socket and no port. The app runs on its own event loop in a background thread, so both
``VolcanoClient`` and ``AsyncVolcanoClient`` (on any loop) can use it.

``expire(key)`` makes the current lease expire now, as if its holder had been paused past its
TTL; ``take_over(key)`` force-releases it and acquires it for another owner, returning that
owner's lease. The holder under test notices at its next renewal (``with_lock`` renews after a
third of the TTL) or, for a raw lease, when it next renews or releases.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import threading
import time
from collections.abc import Coroutine, MutableMapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ._client import AsyncVolcanoClient, VolcanoClient
from ._models import LockLease

__all__ = ["LockServer"]

T = TypeVar("T")
_STARTUP_TIMEOUT = 30.0


class _LoopThread:
    """An event loop of its own in a daemon thread, to run the app whatever the caller does."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="volcano-testing-server", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(_STARTUP_TIMEOUT)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


async def _read_whole(
    transport: httpx.AsyncBaseTransport, request: httpx.Request
) -> httpx.Response:
    response = await transport.handle_async_request(request)
    content = await response.aread()
    return httpx.Response(response.status_code, headers=response.headers, content=content)


class _SyncBridge(httpx.BaseTransport):
    def __init__(self, loop: _LoopThread, asgi: httpx.AsyncBaseTransport) -> None:
        self._loop, self._asgi = loop, asgi

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return self._loop.run(_read_whole(self._asgi, request))


class _AsyncBridge(httpx.AsyncBaseTransport):
    def __init__(self, loop: _LoopThread, asgi: httpx.AsyncBaseTransport) -> None:
        self._loop, self._asgi = loop, asgi

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        future = asyncio.run_coroutine_threadsafe(_read_whole(self._asgi, request), self._loop.loop)
        return await asyncio.wrap_future(future)


class LockServer:
    """The reference server in this process, on a temporary SQLite file; see the module doc."""

    api_url = "http://volcano.testing"

    def __init__(self) -> None:
        try:
            from volcano_server import _auth
            from volcano_server._app import create_app
            from volcano_server.storage import open_store
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "volcano_sdk.testing runs the reference server: pip install 'volcano-sdk[server]'"
            ) from exc
        self._folder = tempfile.TemporaryDirectory(prefix="volcano-testing-")
        self.database = Path(self._folder.name) / "locks.db"
        self._loop = _LoopThread()
        store = open_store(f"sqlite:///{self.database}")
        self.anon_key = _auth.new_key(_auth.ANON_PREFIX)
        self.service_key = _auth.new_key(_auth.SERVICE_PREFIX)
        self._app = create_app(store, sweep_interval=0, access_log=False)
        self._lifespan_done: asyncio.Future[None] | None = None
        self._loop.run(self._start(store, _auth.hash_key))
        self._asgi = httpx.ASGITransport(app=self._app)
        self._admin = self.client()

    async def _start(self, store: Any, hash_key: Any) -> None:
        # The ASGI lifespan protocol by hand: the app opens its store on startup.
        messages: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await messages.put({"type": "lifespan.startup"})

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete":
                started.set_result(None)
            elif message["type"] == "lifespan.startup.failed":
                started.set_exception(RuntimeError(message.get("message", "startup failed")))

        async def run() -> None:
            await self._app({"type": "lifespan", "asgi": {"version": "3.0"}}, messages.get, send)

        self._lifespan_messages = messages
        self._lifespan_done = asyncio.ensure_future(run())
        await started
        await store.create_project("testing", hash_key(self.anon_key), hash_key(self.service_key))

    def client(self, **kwargs: Any) -> VolcanoClient:
        """A ``VolcanoClient`` of this server's project."""
        return VolcanoClient(
            self.anon_key,
            self.service_key,
            self.api_url,
            transport=_SyncBridge(self._loop, self._asgi),
            **kwargs,
        )

    def async_client(self, **kwargs: Any) -> AsyncVolcanoClient:
        """An ``AsyncVolcanoClient`` of this server's project, usable on any event loop."""
        return AsyncVolcanoClient(
            self.anon_key,
            self.service_key,
            self.api_url,
            transport=_AsyncBridge(self._loop, self._asgi),
            **kwargs,
        )

    def expire(self, key: str) -> bool:
        """Makes the current lease on ``key`` expire now; False if none was held."""
        now_us = time.time_ns() // 1000
        with sqlite3.connect(self.database, timeout=10) as db:
            changed = db.execute(
                "UPDATE locks SET expires_at = ? WHERE key = ? AND token IS NOT NULL"
                " AND expires_at > ?",
                (now_us, key, now_us),
            ).rowcount
        return changed == 1

    def take_over(self, key: str, ttl: int = 60) -> LockLease:
        """Force-releases ``key`` and acquires it for a new owner; returns the new lease."""
        self._admin.locks.force_release(key)
        return self._admin.locks.acquire(key, ttl=ttl)

    def close(self) -> None:
        self._admin.close()

        async def shutdown() -> None:
            await self._lifespan_messages.put({"type": "lifespan.shutdown"})
            if self._lifespan_done is not None:
                await self._lifespan_done

        self._loop.run(shutdown())
        self._loop.stop()
        self._folder.cleanup()

    def __enter__(self) -> LockServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
