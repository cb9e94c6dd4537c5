"""``VolcanoClient`` and ``AsyncVolcanoClient``: credentials, connection pool, ``client.locks``."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING

import httpx

from ._core import Outcome, Request
from ._events import EventHook
from ._guard import AsyncRenewer, Renewer
from ._locks import AsyncLocks, Locks

if TYPE_CHECKING:
    from generated.client import AuthenticatedClient

__all__ = ["DEFAULT_API_URL", "DEFAULT_TIMEOUT", "AsyncVolcanoClient", "VolcanoClient"]

DEFAULT_API_URL = "https://api.volcano.dev"
# The generated client waits forever by default; a lock call must not.
DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)


def _check_credentials(anon_key: object, service_key: object, api_url: object) -> None:
    for name, value in (("anon_key", anon_key), ("service_key", service_key)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{name} is empty; set it to the project's key")
    if not isinstance(api_url, str):
        raise TypeError(f"api_url must be a str, not {type(api_url).__name__}")
    if not api_url.startswith(("http://", "https://")):
        raise ValueError(f"api_url must start with http:// or https://, got {api_url!r}")


def _timeout(timeout: float | httpx.Timeout) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return httpx.Timeout(float(timeout))


def _api_client(
    anon_key: str,
    service_key: str,
    api_url: str,
    timeout: httpx.Timeout,
    transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None,
) -> AuthenticatedClient:
    """The generated client both twins build on."""
    _check_credentials(anon_key, service_key, api_url)
    # Imported on first use: the generated client is most of `import volcano_sdk`'s cost.
    from . import _adapter

    api = _adapter.build_client(
        api_url=api_url,
        anon_key=anon_key,
        service_key=service_key,
        timeout=timeout,
        httpx_args={} if transport is None else {"transport": transport},
    )
    return api


def _request_timeout(timeout: httpx.Timeout) -> float:
    parts = [t for t in (timeout.connect, timeout.read, timeout.write, timeout.pool) if t]
    return max(parts) if parts else DEFAULT_TIMEOUT.read or 10.0


class VolcanoClient:
    """A client for one project's locks, from trusted server code.

    ``client.locks`` has ``acquire``, ``get``, ``renew``, ``release``, ``force_release`` and
    ``with_lock``. Close the client (or use it as a context manager) to free its connections
    and its renewal thread. ``on_event`` is called with a ``LockEvent`` on every acquisition,
    renewal, loss and release (from the renewal thread for guards); it must not block.
    """

    def __init__(
        self,
        anon_key: str,
        service_key: str,
        api_url: str = DEFAULT_API_URL,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        self.api_url = api_url
        self._timeout = _timeout(timeout)
        self._api = _api_client(anon_key, service_key, api_url, self._timeout, transport)
        self._http = self._api.get_httpx_client()
        self._renewer: Renewer | None = None
        self._renewer_lock = threading.Lock()
        self.locks = Locks(self._send, self._guard_renewer, on_event)

    def __repr__(self) -> str:
        return f"VolcanoClient(api_url={self.api_url!r})"

    def _send(self, request: Request) -> Outcome:
        from . import _adapter  # loaded by the constructor already; this is a dict lookup

        try:
            response = self._http.request(**_adapter.prepare(request))
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: the client was closed
            return _adapter.transport_failure(exc)
        return _adapter.parse(self._api, request, response)

    def _guard_renewer(self) -> Renewer:
        with self._renewer_lock:
            if self._renewer is None:
                self._renewer = Renewer(self._send, _request_timeout(self._timeout))
            return self._renewer

    def close(self) -> None:
        """Stops background renewals and closes the connections."""
        with self._renewer_lock:
            renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.close()
        self._http.close()

    def __enter__(self) -> VolcanoClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def default_async_transport() -> httpx.AsyncBaseTransport | None:
    """aiohttp's connection pool when the `aiohttp` extra is installed, else httpx's own.

    httpx's async pool slows down as concurrent tasks rise (httpx issue 3215): 16 tasks ran at
    half the speed of one sync thread here, and at about 3x through aiohttp (docs/benchmarks.md).
    """
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return None
    return AiohttpTransport()


class AsyncVolcanoClient:
    """The async twin of ``VolcanoClient``: the same methods, as coroutines.

    Without ``transport=``, it uses aiohttp's connection pool when ``volcano-sdk[aiohttp]`` is
    installed (much faster under concurrency), else httpx's.
    """

    def __init__(
        self,
        anon_key: str,
        service_key: str,
        api_url: str = DEFAULT_API_URL,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        self.api_url = api_url
        self._timeout = _timeout(timeout)
        if transport is None:
            transport = default_async_transport()
        self._api = _api_client(anon_key, service_key, api_url, self._timeout, transport)
        self._http = self._api.get_async_httpx_client()
        self._renewer: AsyncRenewer | None = None
        self.locks = AsyncLocks(self._send, self._guard_renewer, on_event)

    def __repr__(self) -> str:
        return f"AsyncVolcanoClient(api_url={self.api_url!r})"

    async def _send(self, request: Request) -> Outcome:
        from . import _adapter

        try:
            response = await self._http.request(**_adapter.prepare(request))
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: the client was closed
            return _adapter.transport_failure(exc)
        return _adapter.parse(self._api, request, response)

    def _guard_renewer(self) -> AsyncRenewer:
        if self._renewer is None:
            self._renewer = AsyncRenewer(self._send, _request_timeout(self._timeout))
        return self._renewer

    async def close(self) -> None:
        """Stops background renewals and closes the connections."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            await renewer.close()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncVolcanoClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
