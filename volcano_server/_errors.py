"""The service's error tree; every failure leaves as the contract's JSON body.

::

    ApiError                      {"error": {"code", "message", "request_id"}}
     ├── MalformedRequest         400 malformed_request
     ├── Unauthorized             401 unauthorized
     ├── Forbidden                403 forbidden
     ├── NotFound                 404 not_found
     ├── MethodNotAllowed         405 method_not_allowed
     ├── PayloadTooLarge          413 payload_too_large
     ├── ValidationFailed         422 validation_failed
     ├── ServiceUnavailable       503 storage_unavailable (+ Retry-After)
     └── InternalError            500 internal_error

Conflicts (409) and `idempotency_key_reused` (422) are produced by the store as outcomes, not
raised, because they are stored for idempotent replay like any other answer.  Messages never
contain a key, a token or a credential.
"""

from __future__ import annotations

from typing import Any, ClassVar

from starlette.responses import JSONResponse

__all__ = [
    "ApiError",
    "Forbidden",
    "InternalError",
    "MalformedRequest",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "ServiceUnavailable",
    "Unauthorized",
    "ValidationFailed",
    "error_response",
]


class ApiError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class MalformedRequest(ApiError):
    status, code = 400, "malformed_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class ValidationFailed(ApiError):
    status, code = 422, "validation_failed"


class ServiceUnavailable(ApiError):
    status, code = 503, "storage_unavailable"

    def __init__(self, message: str = "the database is unavailable; try again shortly") -> None:
        # Clients (the SDK) wait this long before their single acquisition retry.
        super().__init__(message, headers={"Retry-After": "1"})


class InternalError(ApiError):
    status, code = 500, "internal_error"


def error_body(code: str, message: str, request_id: str, **extra: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "request_id": request_id}
    error.update(extra)
    return {"error": error}


def error_response(exc: ApiError, request_id: str) -> JSONResponse:
    return JSONResponse(
        error_body(exc.code, exc.message, request_id), status_code=exc.status, headers=exc.headers
    )
