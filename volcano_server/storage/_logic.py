"""The lock semantics of DESIGN.md sections 5-11, written once for every backend.

`decide` is pure: given the key's row as locked by the transaction and the database's "now", it
says what to write and what to answer.  Backends supply the row, the clock and the transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ._base import LockRow, LockState, Mutation, Outcome

__all__ = ["Decision", "decide", "format_time", "replay", "state_of"]


@dataclass(frozen=True, slots=True)
class Decision:
    write: LockRow | None  # None: leave the row as it is
    outcome: Outcome


def format_time(value: datetime) -> str:
    """ISO 8601 in UTC with offset and microseconds, e.g. `2026-11-29T12:00:00.123456+00:00`."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _expires_in_ms(expires_at: datetime, now: datetime) -> int:
    return max(0, (expires_at - now) // timedelta(milliseconds=1))


def _lease(m: Mutation, row: LockRow, now: datetime) -> Outcome:
    assert row.expires_at is not None
    return Outcome(
        200,
        {
            "key": m.key,
            # Tokens compare by UUID value, but each answer echoes the spelling it received.
            "token": m.token_text,
            "fencing_token": row.last_fence,
            "expires_at": format_time(row.expires_at),
            "expires_in_ms": _expires_in_ms(row.expires_at, now),
        },
    )


def _conflict(m: Mutation, code: str, message: str, **extra: Any) -> Outcome:
    error: dict[str, Any] = {"code": code, "message": message, "request_id": m.response_request_id}
    error.update(extra)
    return Outcome(409, {"error": error})


def _held(row: LockRow | None, now: datetime) -> bool:
    return (
        row is not None
        and row.token is not None
        and row.expires_at is not None
        and row.expires_at > now
    )


def _free(row: LockRow) -> LockRow:
    # The row stays and keeps last_fence: that is what makes fences never repeat.
    return LockRow(row.last_fence, None, None, None)


def decide(m: Mutation, row: LockRow | None, now: datetime) -> Decision:
    key = m.key
    if m.op == "acquire":
        assert m.ttl is not None
        if row is not None and _held(row, now):
            if row.token == m.token:
                # Recovery of an uncertain acquisition: the current lease, TTL not applied.
                return Decision(None, _lease(m, row, now))
            assert row.expires_at is not None
            return Decision(
                None,
                _conflict(
                    m,
                    "lock_held",
                    "the lock is held by another owner",
                    expires_at=format_time(row.expires_at),
                ),
            )
        fence = (row.last_fence if row is not None else 0) + 1
        new = LockRow(fence, m.token, m.token_text, now + timedelta(seconds=m.ttl))
        return Decision(new, _lease(m, new, now))

    if m.op == "renew":
        assert m.ttl is not None
        if row is None or row.token is None or row.token != m.token:
            return Decision(None, _conflict(m, "not_holder", "the lock is not held by this token"))
        if not _held(row, now):
            # An expired lease is never resurrected, even when nobody took the lock since.
            return Decision(None, _conflict(m, "lease_expired", "the lease has expired"))
        new = LockRow(row.last_fence, row.token, row.token_text, now + timedelta(seconds=m.ttl))
        return Decision(new, _lease(m, new, now))

    if m.op == "release":
        if row is not None and row.token is not None and row.token == m.token:
            # The holder may release its own lease even after it expired.
            return Decision(_free(row), Outcome(200, {"key": key, "released": True}))
        if row is not None and _held(row, now):
            return Decision(None, _conflict(m, "not_holder", "the lock is held by another token"))
        return Decision(None, Outcome(200, {"key": key, "released": False}))

    # force_release
    if row is None or row.token is None:
        return Decision(None, Outcome(200, {"key": key, "removed": False}))
    removed = _held(row, now)
    # An expired lease is cleared too (lazy cleaning), but only an unexpired one counts as removed.
    return Decision(_free(row), Outcome(200, {"key": key, "removed": removed}))


def state_of(row: LockRow | None, now: datetime) -> LockState:
    if row is None:
        return LockState(False, None, None)
    held = _held(row, now)
    return LockState(held, row.expires_at if held else None, row.last_fence or None)


def replay(m: Mutation, fingerprint: str, status: int, body_json: str, now: datetime) -> Outcome:
    """The answer to a request id seen before: the stored response, or 422 when reused.

    A replayed lease's `expires_in_ms` is recomputed against `now`: the stored figure was true
    when first answered, and a client building its local deadline from a replay must not be
    told more time than is left.
    """
    if fingerprint != m.fingerprint:
        return Outcome(
            422,
            {
                "error": {
                    "code": "idempotency_key_reused",
                    "message": "this request id was already used for a different operation",
                    "request_id": m.response_request_id,
                }
            },
        )
    body: dict[str, Any] = json.loads(body_json)
    if isinstance(body.get("error"), dict):
        body["error"]["request_id"] = m.response_request_id
    if "expires_in_ms" in body:
        expires_at = datetime.fromisoformat(body["expires_at"])
        body["expires_in_ms"] = _expires_in_ms(expires_at, now)
    return Outcome(status, body, replayed=True)
