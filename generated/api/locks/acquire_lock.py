from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.acquire_request import AcquireRequest
from ...models.error import Error
from ...models.lease import Lease
from ...types import UNSET, Response, Unset


def _get_kwargs(
    key: str,
    *,
    body: AcquireRequest,
    x_request_id: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_request_id, Unset):
        headers["X-Request-Id"] = x_request_id

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/locks/v1/locks/{key}/acquire".format(
            key=quote(str(key), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | Lease | None:
    if response.status_code == 200:
        response_200 = Lease.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Error.from_dict(response.json())

        return response_409

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
) -> Response[Error | Lease]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    key: str,
    *,
    client: AuthenticatedClient,
    body: AcquireRequest,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | Lease]:
    """Acquire a lease

     Free (no lease, or the lease expired by the database's clock): starts a new ownership
    period with the next fencing token and `expires_at = database now + ttl`. Held by the same
    ownership token: returns the current lease unchanged (recovery of an uncertain
    acquisition; the TTL of the repeat is not applied; `expires_in_ms` tells how much of
    it is left). Held by another token: 409
    `lock_held`, whose body tells when the current lease expires, never its token.

    Args:
        key (str): 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (AcquireRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Lease]
    """

    kwargs = _get_kwargs(
        key=key,
        body=body,
        x_request_id=x_request_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    key: str,
    *,
    client: AuthenticatedClient,
    body: AcquireRequest,
    x_request_id: str | Unset = UNSET,
) -> Error | Lease | None:
    """Acquire a lease

     Free (no lease, or the lease expired by the database's clock): starts a new ownership
    period with the next fencing token and `expires_at = database now + ttl`. Held by the same
    ownership token: returns the current lease unchanged (recovery of an uncertain
    acquisition; the TTL of the repeat is not applied; `expires_in_ms` tells how much of
    it is left). Held by another token: 409
    `lock_held`, whose body tells when the current lease expires, never its token.

    Args:
        key (str): 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (AcquireRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Lease
    """

    return sync_detailed(
        key=key,
        client=client,
        body=body,
        x_request_id=x_request_id,
    ).parsed


async def asyncio_detailed(
    key: str,
    *,
    client: AuthenticatedClient,
    body: AcquireRequest,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | Lease]:
    """Acquire a lease

     Free (no lease, or the lease expired by the database's clock): starts a new ownership
    period with the next fencing token and `expires_at = database now + ttl`. Held by the same
    ownership token: returns the current lease unchanged (recovery of an uncertain
    acquisition; the TTL of the repeat is not applied; `expires_in_ms` tells how much of
    it is left). Held by another token: 409
    `lock_held`, whose body tells when the current lease expires, never its token.

    Args:
        key (str): 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (AcquireRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | Lease]
    """

    kwargs = _get_kwargs(
        key=key,
        body=body,
        x_request_id=x_request_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    key: str,
    *,
    client: AuthenticatedClient,
    body: AcquireRequest,
    x_request_id: str | Unset = UNSET,
) -> Error | Lease | None:
    """Acquire a lease

     Free (no lease, or the lease expired by the database's clock): starts a new ownership
    period with the next fencing token and `expires_at = database now + ttl`. Held by the same
    ownership token: returns the current lease unchanged (recovery of an uncertain
    acquisition; the TTL of the repeat is not applied; `expires_in_ms` tells how much of
    it is left). Held by another token: 409
    `lock_held`, whose body tells when the current lease expires, never its token.

    Args:
        key (str): 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.
        body (AcquireRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | Lease
    """

    return (
        await asyncio_detailed(
            key=key,
            client=client,
            body=body,
            x_request_id=x_request_id,
        )
    ).parsed
