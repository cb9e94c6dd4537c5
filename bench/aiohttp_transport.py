"""PROTOTYPE (bench only, not part of the SDK): an httpx async transport backed by aiohttp.

``httpx.AsyncClient``'s own pool (httpcore over anyio) slows down as concurrent tasks rise
(httpx issue 3215); aiohttp's connector does not.  Passing this as
``AsyncVolcanoClient(..., transport=AiohttpTransport())`` keeps every SDK layer above httpx
unchanged and measures what the transport alone is worth.  It maps aiohttp's errors onto
httpx's so the SDK's error mapping still applies, and it leaves decompression to httpx.
"""

from __future__ import annotations

import aiohttp
import httpx
from multidict import CIMultiDict
from yarl import URL

_SKIP = {"content-length", "transfer-encoding", "host"}


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(self, limit: int = 100) -> None:
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: a ClientSession binds to the loop that is running when it is made.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._limit),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=t.get("pool"),
            sock_connect=t.get("connect"),
            sock_read=t.get("read"),
        )
        headers = CIMultiDict(
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.decode("latin-1").lower() not in _SKIP
        )
        body = await request.aread()
        try:
            async with self._get_session().request(
                request.method,
                URL(str(request.url), encoded=True),  # keep %2F in keys exactly as sent
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
            ) as resp:
                content = await resp.read()
                raw_headers = [(k, v) for k, v in resp.raw_headers]
                status = resp.status
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out", request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(str(exc), request=request) from exc
        return httpx.Response(status, headers=raw_headers, content=content, request=request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
