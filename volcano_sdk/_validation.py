"""Argument checks made before any request is sent: bad input never reaches the wire."""

from __future__ import annotations

import re

from ._models import LockLease

__all__ = [
    "MAX_TTL",
    "MIN_TTL",
    "check_key",
    "check_key_text",
    "check_lease",
    "check_ttl",
    "check_uuid_string",
]

MIN_TTL = 5
MAX_TTL = 7_776_000  # 90 days

# The same sets as openapi.yaml's LockKey and UuidString patterns.
_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,255}")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    if not _KEY.fullmatch(key):
        raise ValueError(
            "key must be 1 to 255 characters from A-Z a-z 0-9 - _ . : / "
            f"(got {len(key)} characters: {key[:40]!r})"
        )
    if key in (".", ".."):
        # URL resolution would turn the path segment into the parent path.
        raise ValueError(f"key {key!r} is reserved: '.' and '..' cannot be lock keys")
    return key


_KEY_TEXT = re.compile(r"[A-Za-z0-9_.:/-]{0,255}")


def check_key_text(text: object, name: str) -> str:
    """A key prefix or a key to list after: the key alphabet, possibly empty."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, not {type(text).__name__}")
    if not _KEY_TEXT.fullmatch(text):
        raise ValueError(f"{name} must be at most 255 characters from A-Z a-z 0-9 - _ . : /")
    return text


def check_ttl(ttl: object) -> int:
    # bool is an int subclass; True seconds is a bug, not a TTL.
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise TypeError(f"ttl must be an int number of seconds, not {type(ttl).__name__}")
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise ValueError(f"ttl must be from {MIN_TTL} to {MAX_TTL} seconds (90 days), got {ttl}")
    return ttl


def check_uuid_string(value: object, name: str) -> str:
    """Checks a caller-supplied UUID string; its spelling is kept exactly as given."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a UUID str (for example str(uuid4())), not {type(value).__name__}"
        )
    if not _UUID.fullmatch(value):
        # The value may be an ownership token: say what is wrong without echoing it.
        raise ValueError(
            f"{name} must be a UUID string like 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'"
        )
    return value


def check_lease(lease: object, key: str) -> LockLease:
    if not isinstance(lease, LockLease):
        raise TypeError(
            "lease must be the LockLease that acquire() or renew() returned, "
            f"not {type(lease).__name__}"
        )
    if lease.key != key:
        raise ValueError(f"lease is for key {lease.key!r}, not {key!r}")
    return lease
