"""Volcano Locks SDK: project-scoped distributed locks (leases with fencing tokens).

    from volcano_sdk import VolcanoClient

    client = VolcanoClient(anon_key=..., service_key=..., api_url=...)
    lease = client.locks.acquire("daily-report", ttl=30)

Architecture: ``_client`` (clients) -> ``_locks`` (sync/async shells) -> ``_core`` (I/O-free
flows: validation, retry, leases, error mapping, guard state) -> ``_adapter`` (the one module
that calls ``generated/``, the client made from openapi.yaml) -> httpx.
"""

from ._client import DEFAULT_API_URL, DEFAULT_TIMEOUT, AsyncVolcanoClient, VolcanoClient
from ._errors import (
    AcquireOutcomeUnknownError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    LockLostError,
    LossReason,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    ServiceUnavailableError,
    StaleFenceError,
    TransportError,
    UnexpectedResponseError,
    ValidationError,
    VolcanoError,
)
from ._events import EventHook, LockEvent, LockEventKind
from ._fencing import DEFAULT_FENCE_TABLE, Fence
from ._guard import AsyncLockGuard, LockGuard
from ._locks import AsyncLocks, Locks
from ._models import LockLease, LockList, LockState
from ._validation import MAX_TTL, MIN_TTL

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_FENCE_TABLE",
    "DEFAULT_TIMEOUT",
    "MAX_TTL",
    "MIN_TTL",
    "APIStatusError",
    "AcquireOutcomeUnknownError",
    "AsyncLockGuard",
    "AsyncLocks",
    "AsyncVolcanoClient",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "EventHook",
    "Fence",
    "LockEvent",
    "LockEventKind",
    "LockGuard",
    "LockLease",
    "LockList",
    "LockLostError",
    "LockState",
    "Locks",
    "LossReason",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ServerError",
    "ServiceUnavailableError",
    "StaleFenceError",
    "TransportError",
    "UnexpectedResponseError",
    "ValidationError",
    "VolcanoClient",
    "VolcanoError",
]

# Public objects say they come from the package, not from its private modules.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
