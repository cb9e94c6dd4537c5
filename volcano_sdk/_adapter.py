"""The only module that touches ``generated/``: it turns core Requests into generated calls.

It uses each operation module's ``_get_kwargs`` and ``_build_response`` rather than
``sync_detailed``: the generated parser raises on answers the contract does not describe (a
status outside ``HTTPStatus`` such as 499 or 520, an HTML 503 from a proxy, a missing field), and
``sync_detailed`` would lose the status with it. Here the status is read first; only 2xx bodies
go through the generated models, and a parse failure becomes ``Reply(parsed=None)`` for the core
to judge. Transport exceptions become ``NoReply``. Nothing from httpx or ``generated`` escapes.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import httpx

from generated.api.locks import (
    acquire_lock,
    force_release_lock,
    get_lock,
    list_locks,
    release_lock,
    renew_leases,
    renew_lock,
)
from generated.client import AuthenticatedClient
from generated.models import (
    AcquireRequest,
    ReleaseRequest,
    RenewBatchItem,
    RenewBatchRequest,
    RenewRequest,
)
from generated.types import UNSET

from ._core import NoReply, Operation, Reply, Request

__all__ = ["build_client", "parse", "prepare", "transport_failure"]

_MODULES: dict[Operation, ModuleType] = {
    Operation.ACQUIRE: acquire_lock,
    Operation.GET: get_lock,
    Operation.RENEW: renew_lock,
    Operation.RELEASE: release_lock,
    Operation.FORCE_RELEASE: force_release_lock,
    Operation.LIST: list_locks,
    Operation.RENEW_BATCH: renew_leases,
}


def build_client(
    *,
    api_url: str,
    anon_key: str,
    service_key: str,
    timeout: httpx.Timeout,
    httpx_args: dict[str, Any],
) -> AuthenticatedClient:
    # Operation-level security takes one credential; the anon key rides as a default header.
    return AuthenticatedClient(
        base_url=api_url,
        token=service_key,
        headers={"apikey": anon_key},
        timeout=timeout,
        httpx_args=httpx_args,
    )


def prepare(request: Request) -> dict[str, Any]:
    """The keyword arguments for ``httpx.Client.request`` that the generated code builds."""
    op = request.operation
    kwargs: dict[str, Any]
    if op is Operation.ACQUIRE:
        kwargs = acquire_lock._get_kwargs(
            request.key,
            body=AcquireRequest(token=request.token, ttl=request.ttl),  # type: ignore[arg-type]
            x_request_id=request.request_id,
        )
    elif op is Operation.RENEW:
        kwargs = renew_lock._get_kwargs(
            request.key,
            body=RenewRequest(token=request.token, ttl=request.ttl),  # type: ignore[arg-type]
            x_request_id=request.request_id,
        )
    elif op is Operation.RELEASE:
        kwargs = release_lock._get_kwargs(
            request.key,
            body=ReleaseRequest(token=request.token),  # type: ignore[arg-type]
            x_request_id=request.request_id,
        )
    elif op is Operation.RENEW_BATCH:
        kwargs = renew_leases._get_kwargs(
            body=RenewBatchRequest(
                leases=[RenewBatchItem(key=i.key, token=i.token, ttl=i.ttl) for i in request.batch]
            ),
            x_request_id=request.request_id,
        )
    elif op is Operation.LIST:
        kwargs = list_locks._get_kwargs(
            prefix=UNSET if request.prefix is None else request.prefix,
            after=UNSET if request.after is None else request.after,
            limit=UNSET if request.limit is None else request.limit,
            x_request_id=request.request_id,
        )
    else:
        kwargs = _MODULES[op]._get_kwargs(request.key, x_request_id=request.request_id)
    if request.timeout is not None:
        kwargs["timeout"] = request.timeout
    return kwargs


def parse(client: AuthenticatedClient, request: Request, response: httpx.Response) -> Reply:
    parsed: object | None = None
    if 200 <= response.status_code < 300:
        try:
            parsed = (
                _MODULES[request.operation]._build_response(client=client, response=response).parsed
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            parsed = None  # the core decides what an unreadable 2xx means for this operation
    return Reply(
        status=response.status_code,
        headers=response.headers,
        content=response.content,
        parsed=parsed,
    )


def transport_failure(exc: Exception) -> NoReply:
    return NoReply(cause=exc, timed_out=isinstance(exc, httpx.TimeoutException))
