"""The SDK's one exception tree.

Every failure of a lock call reaches the caller as one of these; no httpx or generated-client
exception escapes (they are translated in ``_core`` and ``_adapter``). Bad arguments are not
service errors: they raise the built-in ``TypeError``/``ValueError`` before anything is sent.

::

    VolcanoError                         status, code, message, request_id
    ├── APIStatusError                   the service answered with an error status
    │   ├── BadRequestError              400 malformed request
    │   ├── AuthenticationError          401 missing or unknown credential
    │   ├── PermissionDeniedError        403 credential not allowed here
    │   ├── NotFoundError                404 no such route (wrong api_url?)
    │   ├── ConflictError                409 held by another owner, or the lease was lost
    │   ├── PayloadTooLargeError         413
    │   ├── ValidationError              422 rejected field, or a reused request id
    │   ├── RateLimitedError             429 (retry_after)
    │   └── ServerError                  5xx
    │       └── ServiceUnavailableError  503 storage unavailable (retry_after)
    ├── TransportError                   no answer: refused, reset, cut off
    │   └── RequestTimeoutError          no answer in time
    ├── UnexpectedResponseError          an answer that breaks the contract
    ├── AcquireOutcomeUnknownError       acquisition may have succeeded: retry with .token
    │                                    and .request_id to learn the outcome
    ├── LockLostError                    a with_lock guard lost ownership (.reason)
    └── StaleFenceError                  your store refused a superseded fencing token

Messages never contain a service key or an ownership token.
"""

from __future__ import annotations

import datetime
import enum

__all__ = [
    "APIStatusError",
    "AcquireOutcomeUnknownError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "LockLostError",
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
    "VolcanoError",
]


class VolcanoError(Exception):
    """Root of every error the SDK raises for a lock call."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id

    def __str__(self) -> str:
        details = [
            f"{name}={value}"
            for name, value in (
                ("status", self.status),
                ("code", self.code),
                ("request_id", self.request_id),
            )
            if value is not None
        ]
        return f"{self.message} ({', '.join(details)})" if details else self.message


class APIStatusError(VolcanoError):
    """The service answered with a non-2xx status."""

    status: int


class BadRequestError(APIStatusError):
    """400: the request was malformed."""


class AuthenticationError(APIStatusError):
    """401: a credential is missing or unknown."""


class PermissionDeniedError(APIStatusError):
    """403: the credentials do not allow this operation (anon key alone, keys of two projects)."""


class NotFoundError(APIStatusError):
    """404: no such route; ``api_url`` probably points at something else."""


class ConflictError(APIStatusError):
    """409: the lock is held by another owner, or the caller's lease was lost.

    ``code`` tells which: ``lock_held`` (``expires_at`` says when the current lease ends),
    ``lease_expired`` or ``not_holder``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        expires_at: datetime.datetime | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.expires_at = expires_at


class PayloadTooLargeError(APIStatusError):
    """413: the request body was too large."""


class ValidationError(APIStatusError):
    """422: a field was rejected, or the request id was reused for a different operation."""


class _RetryAfterMixin(APIStatusError):
    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.retry_after = retry_after


class RateLimitedError(_RetryAfterMixin):
    """429: too many requests; ``retry_after`` is the server's hint in seconds, if any."""


class ServerError(APIStatusError):
    """5xx: the service failed."""


class ServiceUnavailableError(_RetryAfterMixin, ServerError):
    """503: the service's storage is unavailable; ``retry_after`` is its hint in seconds."""


class TransportError(VolcanoError):
    """No answer came back: the connection was refused, reset or cut off."""


class RequestTimeoutError(TransportError):
    """No answer came back in time."""


class UnexpectedResponseError(VolcanoError):
    """The service answered something the contract does not allow (an unreadable body...)."""


class AcquireOutcomeUnknownError(VolcanoError):
    """An acquisition may or may not have taken effect.

    Call ``acquire`` again with ``token=err.token`` and ``request_id=err.request_id`` (and the
    same key and TTL) to learn the outcome: the service answers with the lease if it was granted.
    Do not start a new owner with a new token: a granted lease would block it until it expires.
    The cause of the last failure is chained as ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str,
        ttl: int,
        token: str,
        request_id: str,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.key = key
        self.ttl = ttl
        # Kept as an attribute, never in the message or args, so logs and reprs stay clean.
        self.token = token
        self.request_id = request_id


class LossReason(enum.Enum):
    """Why a ``with_lock`` guard stopped owning its lock."""

    SUPERSEDED = "superseded"
    """Another owner holds the lock, or it was force-released."""
    EXPIRED = "expired"
    """The service says the lease expired before it could be renewed."""
    UNREACHABLE = "unreachable"
    """No renewal succeeded before the local deadline; the lease may have expired."""


class LockLostError(VolcanoError):
    """A ``with_lock`` guard lost ownership of its lock while the block ran."""

    def __init__(self, message: str, *, key: str, reason: LossReason) -> None:
        super().__init__(message)
        self.key = key
        self.reason = reason


class StaleFenceError(VolcanoError):
    """The protected store refused a fencing token: a newer holder has claimed the resource.

    Raised by ``Fence.claim`` and ``Fence.verify``; stop the protected work, the lease is gone.
    """

    def __init__(self, message: str, *, resource: str, fencing_token: int) -> None:
        super().__init__(message)
        self.resource = resource
        self.fencing_token = fencing_token
