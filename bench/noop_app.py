"""The HTTP ceiling: a Starlette endpoint that answers every request with a small fixed JSON.

Served by uvicorn with the same loop and parser as ``volcano-locks serve`` (uvloop, httptools).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_BODY = {
    "key": "k",
    "token": "00000000-0000-4000-8000-000000000000",
    "expires_at": "2026-01-01T00:00:00.000000Z",
    "fencing_token": 1,
    "released": True,
}


async def noop(request: Request) -> Response:
    return JSONResponse(_BODY)


app = Starlette(routes=[Route("/{rest:path}", noop, methods=["GET", "POST"])])
