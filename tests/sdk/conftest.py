"""SDK fixtures: clients on the real server (per backend), and a faulty transport."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from volcano_sdk import AsyncVolcanoClient, VolcanoClient


def _same_request_id(recorded: Any, live: Any) -> None:
    # The request id names the logical call; a replay with another one is another call.
    assert recorded.headers.get("X-Request-Id") == live.headers.get("X-Request-Id")


def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    vcr.register_matcher("request_id", _same_request_id)


@pytest.fixture
def key() -> str:
    """A fresh lock key per test, so tests sharing a server never meet."""
    return f"test/{uuid.uuid4().hex[:12]}:job"


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[VolcanoClient]:
    with VolcanoClient(live_server.anon_key, live_server.service_key, live_server.url) as c:
        yield c


@pytest.fixture
def other_client(live_server: LiveServer) -> Iterator[VolcanoClient]:
    """A second, independent client of the same project: a competing worker."""
    with VolcanoClient(live_server.anon_key, live_server.service_key, live_server.url) as c:
        yield c


@pytest.fixture(params=["aiohttp", "httpx"])
async def async_client(
    live_server: LiveServer, request: pytest.FixtureRequest
) -> AsyncIterator[AsyncVolcanoClient]:
    """The async client on both transports: aiohttp's (the default with the extra) and httpx's."""
    transport = httpx.AsyncHTTPTransport() if request.param == "httpx" else None
    async with AsyncVolcanoClient(
        live_server.anon_key, live_server.service_key, live_server.url, transport=transport
    ) as c:
        if request.param == "aiohttp":
            from httpx_aiohttp import AiohttpTransport

            assert isinstance(c._http._transport, AiohttpTransport)
        yield c


# What a faulty network does to one request, by name:
#   "pass"         forwards it and returns the server's answer;
#   "503-before"   answers 503 like a proxy whose upstream is down: the server never sees it;
#   "503-after"    forwards it (the server does the work), then answers 503 instead;
#   "cut-after"    forwards it, then drops the connection before the answer arrives.
FAULTS = ("pass", "503-before", "503-after", "cut-after")


def _faulty_answer(fault: str, real: httpx.Response | None) -> httpx.Response:
    if fault == "pass":
        assert real is not None
        return real
    if fault in ("503-before", "503-after"):
        return httpx.Response(503, headers={"Retry-After": "0"}, text="<html>gateway</html>")
    if fault == "cut-after":
        raise httpx.RemoteProtocolError("server disconnected without sending a response")
    raise ValueError(fault)


class FaultyTransport(httpx.BaseTransport):
    """Real HTTP to the real server, with one scripted fault per request (then "pass")."""

    def __init__(self, faults: list[str]) -> None:
        assert all(f in FAULTS for f in faults)
        self.faults = list(faults)
        self.sent: list[httpx.Request] = []
        self._real = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        fault = self.faults.pop(0) if self.faults else "pass"
        real = None
        if fault != "503-before":
            real = self._real.handle_request(request)
            real.read()
        return _faulty_answer(fault, real)

    def close(self) -> None:
        self._real.close()


class AsyncFaultyTransport(httpx.AsyncBaseTransport):
    """The async twin of ``FaultyTransport``."""

    def __init__(self, faults: list[str]) -> None:
        assert all(f in FAULTS for f in faults)
        self.faults = list(faults)
        self.sent: list[httpx.Request] = []
        self._real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        fault = self.faults.pop(0) if self.faults else "pass"
        real = None
        if fault != "503-before":
            real = await self._real.handle_async_request(request)
            await real.aread()
        return _faulty_answer(fault, real)

    async def aclose(self) -> None:
        await self._real.aclose()
