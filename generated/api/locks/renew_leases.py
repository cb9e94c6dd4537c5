from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.renew_batch_request import RenewBatchRequest
from ...models.renew_batch_result import RenewBatchResult
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: RenewBatchRequest,
    x_request_id: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_request_id, Unset):
        headers["X-Request-Id"] = x_request_id

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/locks/v1/leases/renew",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | RenewBatchResult | None:
    if response.status_code == 200:
        response_200 = RenewBatchResult.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Error.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if response.status_code == 413:
        response_413 = Error.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = Error.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = Error.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | RenewBatchResult]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: RenewBatchRequest,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | RenewBatchResult]:
    """Renew many leases at once

     Renews up to 500 leases of the project in one request, each exactly as the renew
    operation would (held by its token and unexpired: `expires_at = database now + ttl`,
    same fence; expired: `lease_expired`; otherwise `not_holder`), and answers one result
    per item, in order: `lease` on success, else `error` with the status and code a single
    renewal would have got. A client holding many leases renews them together instead of
    one request each. Each key appears at most once. Batches are not deduplicated by
    request id: repeating one renews again from the database's now, which is harmless.
    Bodies may be up to 262144 bytes. If the database is unavailable the whole batch gets
    503, and some items may have been renewed.

    Args:
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (RenewBatchRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RenewBatchResult]
    """

    kwargs = _get_kwargs(
        body=body,
        x_request_id=x_request_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: RenewBatchRequest,
    x_request_id: str | Unset = UNSET,
) -> Error | RenewBatchResult | None:
    """Renew many leases at once

     Renews up to 500 leases of the project in one request, each exactly as the renew
    operation would (held by its token and unexpired: `expires_at = database now + ttl`,
    same fence; expired: `lease_expired`; otherwise `not_holder`), and answers one result
    per item, in order: `lease` on success, else `error` with the status and code a single
    renewal would have got. A client holding many leases renews them together instead of
    one request each. Each key appears at most once. Batches are not deduplicated by
    request id: repeating one renews again from the database's now, which is harmless.
    Bodies may be up to 262144 bytes. If the database is unavailable the whole batch gets
    503, and some items may have been renewed.

    Args:
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (RenewBatchRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RenewBatchResult
    """

    return sync_detailed(
        client=client,
        body=body,
        x_request_id=x_request_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: RenewBatchRequest,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | RenewBatchResult]:
    """Renew many leases at once

     Renews up to 500 leases of the project in one request, each exactly as the renew
    operation would (held by its token and unexpired: `expires_at = database now + ttl`,
    same fence; expired: `lease_expired`; otherwise `not_holder`), and answers one result
    per item, in order: `lease` on success, else `error` with the status and code a single
    renewal would have got. A client holding many leases renews them together instead of
    one request each. Each key appears at most once. Batches are not deduplicated by
    request id: repeating one renews again from the database's now, which is harmless.
    Bodies may be up to 262144 bytes. If the database is unavailable the whole batch gets
    503, and some items may have been renewed.

    Args:
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (RenewBatchRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RenewBatchResult]
    """

    kwargs = _get_kwargs(
        body=body,
        x_request_id=x_request_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: RenewBatchRequest,
    x_request_id: str | Unset = UNSET,
) -> Error | RenewBatchResult | None:
    """Renew many leases at once

     Renews up to 500 leases of the project in one request, each exactly as the renew
    operation would (held by its token and unexpired: `expires_at = database now + ttl`,
    same fence; expired: `lease_expired`; otherwise `not_holder`), and answers one result
    per item, in order: `lease` on success, else `error` with the status and code a single
    renewal would have got. A client holding many leases renews them together instead of
    one request each. Each key appears at most once. Batches are not deduplicated by
    request id: repeating one renews again from the database's now, which is harmless.
    Bodies may be up to 262144 bytes. If the database is unavailable the whole batch gets
    503, and some items may have been renewed.

    Args:
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (RenewBatchRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RenewBatchResult
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            x_request_id=x_request_id,
        )
    ).parsed
