from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.lock_list import LockList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    prefix: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    x_request_id: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(x_request_id, Unset):
        headers["X-Request-Id"] = x_request_id

    params: dict[str, Any] = {}

    params["prefix"] = prefix

    params["after"] = after

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/locks/v1/locks",
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | LockList | None:
    if response.status_code == 200:
        response_200 = LockList.from_dict(response.json())

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
) -> Response[Error | LockList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    prefix: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | LockList]:
    """List held locks

     The project's currently held (unexpired) locks in key order (bytewise), a page at a
    time: pass the last key of a page as `after` to get the next one. `next_after` is null
    on the last page. Never reveals owner tokens and acquires nothing.

    Args:
        prefix (str | Unset):
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LockList]
    """

    kwargs = _get_kwargs(
        prefix=prefix,
        after=after,
        limit=limit,
        x_request_id=x_request_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    prefix: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    x_request_id: str | Unset = UNSET,
) -> Error | LockList | None:
    """List held locks

     The project's currently held (unexpired) locks in key order (bytewise), a page at a
    time: pass the last key of a page as `after` to get the next one. `next_after` is null
    on the last page. Never reveals owner tokens and acquires nothing.

    Args:
        prefix (str | Unset):
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LockList
    """

    return sync_detailed(
        client=client,
        prefix=prefix,
        after=after,
        limit=limit,
        x_request_id=x_request_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    prefix: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    x_request_id: str | Unset = UNSET,
) -> Response[Error | LockList]:
    """List held locks

     The project's currently held (unexpired) locks in key order (bytewise), a page at a
    time: pass the last key of a page as `after` to get the next one. `next_after` is null
    on the last page. Never reveals owner tokens and acquires nothing.

    Args:
        prefix (str | Unset):
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | LockList]
    """

    kwargs = _get_kwargs(
        prefix=prefix,
        after=after,
        limit=limit,
        x_request_id=x_request_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    prefix: str | Unset = UNSET,
    after: str | Unset = UNSET,
    limit: int | Unset = 100,
    x_request_id: str | Unset = UNSET,
) -> Error | LockList | None:
    """List held locks

     The project's currently held (unexpired) locks in key order (bytewise), a page at a
    time: pass the last key of a page as `after` to get the next one. `next_after` is null
    on the last page. Never reveals owner tokens and acquires nothing.

    Args:
        prefix (str | Unset):
        after (str | Unset):
        limit (int | Unset):  Default: 100.
        x_request_id (str | Unset): A UUID in the 8-4-4-4-12 hexadecimal form, any letter case.
            Its spelling is kept as sent.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | LockList
    """

    return (
        await asyncio_detailed(
            client=client,
            prefix=prefix,
            after=after,
            limit=limit,
            x_request_id=x_request_id,
        )
    ).parsed
