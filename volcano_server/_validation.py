"""Explicit validation of everything a request carries; the contract is openapi.yaml.

Nothing here trusts a framework's coercion: `True` is not a TTL, `"30"` is not a TTL, `30.0`
is not a TTL.  Unknown JSON fields are ignored, so newer clients can talk to older servers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from ._errors import MalformedRequest, PayloadTooLarge, ValidationFailed

__all__ = [
    "MAX_BATCH_BODY_BYTES",
    "MAX_BODY_BYTES",
    "TTL_MAX",
    "TTL_MIN",
    "is_uuid",
    "read_json_object",
    "validate_key",
    "validate_renew_batch",
    "validate_token",
    "validate_ttl",
]

MAX_BODY_BYTES = 4096
TTL_MIN = 5
TTL_MAX = 7_776_000  # 90 days

_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,255}")
# ASCII only: str.isdigit-style classes would accept other scripts' digits.
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def is_uuid(value: object) -> bool:
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def validate_key(key: str) -> str:
    # `.` and `..` alone would be eaten by URL resolution on the way here.
    if _KEY.fullmatch(key) is None or key in (".", ".."):
        raise ValidationFailed(
            "the key must be 1 to 255 characters from A-Z a-z 0-9 - _ . : / and not '.' or '..'"
        )
    return key


MAX_BATCH_BODY_BYTES = 262_144  # 500 items with 255-character keys fit
MAX_BATCH_ITEMS = 500


def validate_renew_batch(body: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(key, token, ttl) of every item of a batch renewal; 422 for anything off-contract."""
    items = body.get("leases")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH_ITEMS:
        raise ValidationFailed(f"leases must be a list of 1 to {MAX_BATCH_ITEMS} items")
    checked: list[tuple[str, str, int]] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValidationFailed("each lease must be an object with key, token and ttl")
        key = validate_key(item["key"])
        if key in seen:
            raise ValidationFailed("a key may appear only once in a batch")
        seen.add(key)
        checked.append((key, validate_token(item), validate_ttl(item)))
    return checked


_KEY_TEXT = re.compile(r"[A-Za-z0-9_.:/-]{0,255}")
MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100


def validate_list_query(query: Mapping[str, str]) -> tuple[str, str, int]:
    """(prefix, after, limit) of a list request; 422 for anything outside the contract."""
    prefix, after = query.get("prefix", ""), query.get("after", "")
    for name, value in (("prefix", prefix), ("after", after)):
        if _KEY_TEXT.fullmatch(value) is None:
            raise ValidationFailed(
                f"{name} must be at most 255 characters from A-Z a-z 0-9 - _ . : /"
            )
    raw_limit = query.get("limit", str(DEFAULT_LIST_LIMIT))
    ascii_digits = raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 4
    if not ascii_digits or not 1 <= int(raw_limit) <= MAX_LIST_LIMIT:
        raise ValidationFailed(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    return prefix, after, int(raw_limit)


def validate_token(body: dict[str, Any]) -> str:
    if "token" not in body:
        raise ValidationFailed("token is required")
    token = body["token"]
    if not is_uuid(token):
        raise ValidationFailed("token must be a UUID string (8-4-4-4-12 hexadecimal)")
    assert isinstance(token, str)
    return token


def validate_ttl(body: dict[str, Any]) -> int:
    if "ttl" not in body:
        raise ValidationFailed("ttl is required")
    ttl = body["ttl"]
    # type() rather than isinstance(): bool is a subclass of int.
    if type(ttl) is not int:
        raise ValidationFailed("ttl must be an integer number of seconds")
    if not TTL_MIN <= ttl <= TTL_MAX:
        raise ValidationFailed(f"ttl must be between {TTL_MIN} and {TTL_MAX} seconds")
    return ttl


async def read_json_object(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The body as a JSON object, read at most `limit` (+1) bytes into memory."""
    length = request.headers.get("content-length")
    declared = int(length) if length and length.isascii() and length.isdigit() else 0
    if declared > limit:
        raise PayloadTooLarge(f"the request body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body exceeds {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # includes JSONDecodeError, UnicodeDecodeError
        raise MalformedRequest("the request body is not valid JSON") from exc
    if not isinstance(body, dict):
        raise MalformedRequest("the request body must be a JSON object")
    return body
