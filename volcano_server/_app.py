"""The ASGI application: routes of openapi.yaml on Starlette, nothing generated from code.

Lock routes are matched on the raw (still percent-encoded) path.  A key travels as one path
segment with `/` sent as `%2F`; servers decode that into `scope["path"]`, where the key
`x/acquire` and the acquire route of the key `x` would look the same.  In the raw path the only
literal `/` are the route's own, so splitting it is unambiguous, and because the key alphabet
has no `%`, decoding a segment is lossless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import storage
from ._auth import Authenticator
from ._errors import (
    ApiError,
    InternalError,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    ValidationFailed,
    error_response,
)
from ._metrics import CONTENT_TYPE_LATEST, Metrics
from ._validation import (
    MAX_BATCH_BODY_BYTES,
    is_uuid,
    read_json_object,
    validate_key,
    validate_list_query,
    validate_renew_batch,
    validate_token,
    validate_ttl,
)
from .storage import Mutation, Operation, Store
from .storage._logic import format_time

__all__ = ["app_from_env", "create_app"]

logger = logging.getLogger("volcano_server")
access_logger = logging.getLogger("volcano_server.access")

_LOCKS_PREFIX = "/locks/v1/locks/"
_ACTIONS: dict[str, Operation] = {
    "acquire": "acquire",
    "renew": "renew",
    "release": "release",
    "force-release": "force_release",
}
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]
_REQUEST_ID = "volcano.request_id"
_REQUEST_ID_INVALID = "volcano.request_id_invalid"
_ROUTE = "volcano.route"  # the route template, for the access log (never the key itself)


def _request_id(request: Request) -> str:
    return str(request.scope.get(_REQUEST_ID) or uuid.uuid4())


class _RequestContext:
    """Assigns or checks the request id, echoes it, logs access, and turns crashes into 500s.

    It sits outside Starlette's own exception handling so that even a 404, a 405 or an
    unexpected exception carries the request id in its header and body.
    """

    def __init__(self, app: ASGIApp, *, access_log: bool) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        sent = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                sent = value.decode("latin-1")
                break
        invalid = sent is not None and not is_uuid(sent)
        request_id = sent if sent is not None and not invalid else str(uuid.uuid4())
        scope[_REQUEST_ID] = request_id
        # Lock routes refuse an invalid id with 422, after authentication (so a request without
        # credentials learns nothing but 401); other routes just use the assigned one.
        scope[_REQUEST_ID_INVALID] = invalid
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0] != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Details go to the server log only; the client learns nothing internal.
            logger.exception("unhandled error in request %s", request_id)
            if response_started:
                raise
            await error_response(InternalError("internal server error"), request_id)(
                scope, receive, send_with_id
            )
        finally:
            if self.access_log:
                client = scope.get("client")
                access_logger.info(
                    '%s - "%s %s" %d %.1fms request_id=%s',
                    f"{client[0]}:{client[1]}" if client else "-",
                    scope["method"],
                    scope.get(_ROUTE, "(unmatched)"),
                    status,
                    (time.perf_counter() - started) * 1000,
                    request_id,
                )


class _PrefixRoute(Route):
    """Every path under a prefix, whatever it contains.

    A `{rest:path}` route would not do: its regex `.*` does not match a newline, so a key with
    an encoded line feed would get 404 instead of the 422 it deserves.
    """

    def __init__(self, prefix: str, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        super().__init__(prefix + "{rest:path}", endpoint, methods=_ALL_METHODS)
        self.prefix = prefix

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):  # mounted under a prefix (uvicorn --root-path)
            path = path[len(root) :]
        if scope["type"] == "http" and path.startswith(self.prefix):
            return Match.FULL, {"endpoint": self.endpoint, "path_params": {}}
        return Match.NONE, {}


def _lock_route(request: Request) -> tuple[Operation | None, str]:
    """(operation, decoded key) from the raw path; `None` is the GET of the lock's state."""
    raw_path: bytes | None = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(request.scope["path"])
    root = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    rest = path[len(_LOCKS_PREFIX) :] if path.startswith(_LOCKS_PREFIX) else ""
    parts = rest.split("/")
    method = request.method
    if len(parts) == 1 and parts[0]:
        request.scope[_ROUTE] = _LOCKS_PREFIX + "{key}"
        if method not in ("GET", "HEAD"):
            raise MethodNotAllowed("use GET", headers={"Allow": "GET, HEAD"})
        op: Operation | None = None
    elif len(parts) == 2 and parts[1] in _ACTIONS:
        request.scope[_ROUTE] = _LOCKS_PREFIX + "{key}/" + parts[1]
        if method != "POST":
            raise MethodNotAllowed("use POST", headers={"Allow": "POST"})
        op = _ACTIONS[parts[1]]
    else:
        raise NotFound("no such route")
    # Invalid UTF-8 escapes decode to U+FFFD, which the key validation then refuses (422).
    return op, unquote(parts[0], errors="replace")


@dataclass(slots=True)
class _Call:
    """What a lock endpoint tells the metrics about the request it served."""

    operation: str = ""
    replayed: bool = False


def _state_body(key: str, state: storage.LockState) -> dict[str, object]:
    return {
        "key": key,
        "held": state.held,
        "expires_at": None if state.expires_at is None else format_time(state.expires_at),
        "fencing_token": state.fencing_token,
    }


def create_app(
    store: Store,
    *,
    auth_cache_seconds: float = 2.0,
    sweep_interval: float = 60.0,
    access_log: bool = True,
) -> Starlette:
    """The service over `store`; the app opens the store at startup and closes it at shutdown."""
    auth = Authenticator(store, cache_seconds=auth_cache_seconds)
    metrics = Metrics()

    async def health(request: Request) -> Response:
        request.scope[_ROUTE] = "/health"
        return JSONResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        request.scope[_ROUTE] = "/ready"
        try:
            await store.ping()
        except storage.StorageUnavailable as exc:
            raise ServiceUnavailable() from exc
        return JSONResponse({"status": "ready"})

    def measured(
        handler: Callable[[Request, _Call], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """Counts and times a lock operation, and turns an unreachable database into 503."""

        async def endpoint(request: Request) -> Response:
            call = _Call()
            started = time.perf_counter()
            status = 500
            try:
                response = await handler(request, call)
                status = response.status_code
                return response
            except storage.StorageUnavailable as exc:
                status = ServiceUnavailable.status
                metrics.storage_errors.inc()
                logger.warning("storage unavailable (request %s): %s", _request_id(request), exc)
                raise ServiceUnavailable() from exc
            except ApiError as exc:
                status = exc.status
                raise
            finally:
                if call.operation:  # unrouted requests (404, 405) are not lock operations
                    elapsed = time.perf_counter() - started
                    metrics.observe(call.operation, status, elapsed, replayed=call.replayed)

        return endpoint

    async def authorize(request: Request) -> int:
        project_id = await auth.authenticate(request.headers)
        if request.scope.get(_REQUEST_ID_INVALID):
            raise ValidationFailed("X-Request-Id must be a UUID string (8-4-4-4-12)")
        return project_id

    @measured
    async def locks(request: Request, call: _Call) -> Response:
        op, raw_key = _lock_route(request)
        call.operation = op or "get"
        project_id = await authorize(request)
        key = validate_key(raw_key)
        if op is None:
            return JSONResponse(_state_body(key, await store.get_lock(project_id, key)))
        token: str | None = None
        ttl: int | None = None
        if op != "force_release":  # it has no body; one sent anyway is not read
            body = await read_json_object(request)
            token = validate_token(body)
            if op != "release":
                ttl = validate_ttl(body)
        outcome = await store.mutate(
            Mutation(
                project_id=project_id,
                op=op,
                key=key,
                token_text=token,
                ttl=ttl,
                request_id=request.headers.get("x-request-id"),
                response_request_id=_request_id(request),
            )
        )
        call.replayed = outcome.replayed
        return JSONResponse(outcome.body, status_code=outcome.status)

    @measured
    async def list_locks(request: Request, call: _Call) -> Response:
        request.scope[_ROUTE] = "/locks/v1/locks"
        call.operation = "list"
        project_id = await authorize(request)
        prefix, after, limit = validate_list_query(request.query_params)
        held = await store.list_locks(project_id, prefix=prefix, after=after, limit=limit)
        return JSONResponse(
            {
                "locks": [_state_body(key, state) for key, state in held],
                # A full page may have more after it; a short one is the last.
                "next_after": held[-1][0] if len(held) == limit else None,
            }
        )

    @measured
    async def renew_leases(request: Request, call: _Call) -> Response:
        request.scope[_ROUTE] = "/locks/v1/leases/renew"
        call.operation = "renew_batch"
        project_id = await authorize(request)
        body = await read_json_object(request, MAX_BATCH_BODY_BYTES)
        items = validate_renew_batch(body)
        request_id = _request_id(request)
        # Concurrent mutations: the SQLite store commits the ones queued together in one
        # transaction (one fsync), PostgreSQL spreads them over its pool.
        outcomes = await asyncio.gather(
            *(
                store.mutate(
                    Mutation(
                        project_id=project_id,
                        op="renew",
                        key=key,
                        token_text=token,
                        ttl=ttl,
                        request_id=None,  # batches are not deduplicated (see the contract)
                        response_request_id=request_id,
                    )
                )
                for key, token, ttl in items
            )
        )
        results = [
            {"key": key, "status": out.status, "lease": out.body}
            if out.status == 200
            else {"key": key, "status": out.status, "error": out.body["error"]}
            for (key, _, _), out in zip(items, outcomes, strict=True)
        ]
        return JSONResponse({"results": results})

    async def metrics_endpoint(request: Request) -> Response:
        request.scope[_ROUTE] = "/metrics"
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc, _request_id(request))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error: ApiError
        if exc.status_code == 404:
            error = NotFound("no such route")
        elif exc.status_code == 405:
            error = MethodNotAllowed("method not allowed", headers=dict(exc.headers or {}))
        else:  # pragma: no cover - Starlette raises no others on our routes
            error = InternalError("unexpected HTTP error")
        return error_response(error, _request_id(request))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await store.open()
        sweeper = asyncio.create_task(_sweep_forever(store, sweep_interval))
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await store.close()

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET", "HEAD"]),
            Route("/ready", ready, methods=["GET", "HEAD"]),
            Route("/locks/v1/locks", list_locks, methods=["GET", "HEAD"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/locks/v1/leases/renew", renew_leases, methods=["POST"]),
            _PrefixRoute(_LOCKS_PREFIX, locks),
        ],
        exception_handlers={ApiError: api_error, HTTPException: http_error},
        lifespan=lifespan,
    )
    # A redirect to "the same path with a slash" would be a 307, not the contract's JSON 404.
    app.router.redirect_slashes = False
    app.add_middleware(_RequestContext, access_log=access_log)
    return app


async def _sweep_forever(store: Store, interval: float) -> None:
    """Housekeeping: clear long-expired leases (fences kept) and purge old idempotency records."""
    if interval <= 0:
        return
    while True:
        # Jitter so that replicas started together do not sweep in lockstep.
        await asyncio.sleep(interval * random.uniform(0.5, 1.5))
        try:
            result = await store.sweep()
            if result.leases_cleared or result.idempotency_purged:
                logger.info(
                    "sweep: cleared %d expired leases, purged %d idempotency records",
                    result.leases_cleared,
                    result.idempotency_purged,
                )
        except storage.StorageUnavailable as exc:
            logger.warning("sweep skipped, storage unavailable: %s", exc)
        except Exception:
            logger.exception("sweep failed")


def app_from_env() -> Starlette:
    """Factory for uvicorn workers; `volcano-locks serve` sets these variables."""
    url = os.environ["VOLCANO_DATABASE_URL"]
    return create_app(
        storage.open_store(url),
        auth_cache_seconds=float(os.environ.get("VOLCANO_AUTH_CACHE_SECONDS", "2")),
        sweep_interval=float(os.environ.get("VOLCANO_SWEEP_INTERVAL", "60")),
        access_log=os.environ.get("VOLCANO_ACCESS_LOG", "1") == "1",
    )
