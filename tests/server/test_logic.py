"""The lock semantics as a pure function (storage/_logic.py), at exact instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from volcano_server.storage import LockRow, Mutation
from volcano_server.storage._logic import decide, format_time, replay, state_of

NOW = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
T = "AAAAAAAA-0000-4000-8000-000000000001"
OTHER = "bbbbbbbb-0000-4000-8000-000000000002"


def _m(op: str, token: str | None = T, ttl: int | None = 30, rid: str | None = None) -> Mutation:
    return Mutation(1, op, "k", token, ttl, rid, rid or "assigned")  # type: ignore[arg-type]


def _held(until: datetime = NOW + timedelta(seconds=10), fence: int = 7) -> LockRow:
    return LockRow(fence, T.lower(), T, until)


def test_expiry_boundary_is_exclusive() -> None:
    # A lease whose expires_at equals now has expired.
    assert not state_of(_held(until=NOW), NOW).held
    assert state_of(_held(until=NOW + timedelta(microseconds=1)), NOW).held
    d = decide(_m("acquire", OTHER), _held(until=NOW), NOW)
    assert d.outcome.status == 200 and d.outcome.body["fencing_token"] == 8
    assert decide(_m("renew"), _held(until=NOW), NOW).outcome.body["error"]["code"] == (
        "lease_expired"
    )


def test_acquire_writes_next_fence_and_expiry_from_now() -> None:
    d = decide(_m("acquire", ttl=5), None, NOW)
    assert d.write == LockRow(1, T.lower(), T, NOW + timedelta(seconds=5))
    assert d.outcome.body == {
        "key": "k",
        "token": T,
        "fencing_token": 1,
        "expires_at": "2026-11-29T12:00:05.123456+00:00",
        "expires_in_ms": 5000,
    }


def test_no_write_when_nothing_changes() -> None:
    assert decide(_m("acquire", T.lower()), _held(), NOW).write is None  # same owner
    assert decide(_m("acquire", OTHER), _held(), NOW).write is None  # conflict
    assert decide(_m("release", OTHER), _held(), NOW).write is None
    assert decide(_m("release"), None, NOW).write is None
    assert decide(_m("force_release", None, None), None, NOW).write is None


def test_freeing_keeps_the_fence() -> None:
    for op in ("release", "force_release"):
        d = decide(_m(op), _held(fence=41), NOW)
        assert d.write == LockRow(41, None, None, None)


def test_conflict_body_names_the_request_and_hides_the_token() -> None:
    body = decide(_m("acquire", OTHER, rid="R"), _held(), NOW).outcome.body
    assert body == {
        "error": {
            "code": "lock_held",
            "message": "the lock is held by another owner",
            "request_id": "R",
            "expires_at": format_time(NOW + timedelta(seconds=10)),
        }
    }


def test_replay_and_reuse() -> None:
    first = _m("acquire", rid="R")
    assert replay(first, first.fingerprint, 200, '{"a": 1}', NOW).body == {"a": 1}
    again = _m("acquire", T.lower(), rid="r")  # other spellings, same call
    assert again.fingerprint == first.fingerprint
    stored = '{"error": {"code": "lock_held", "message": "m", "request_id": "R"}}'
    assert replay(again, first.fingerprint, 409, stored, NOW).body["error"]["request_id"] == "r"
    other = _m("acquire", ttl=31, rid="R")
    out = replay(other, first.fingerprint, 200, "{}", NOW)
    assert out.status == 422 and out.body["error"]["code"] == "idempotency_key_reused"


def test_leases_tell_the_time_left_and_replays_recompute_it() -> None:
    m = _m("acquire", T.upper(), rid="R")
    body = decide(m, None, NOW).outcome.body
    assert body["expires_in_ms"] == m.ttl * 1000 and body["token"] == T.upper()
    again = decide(_m("acquire", T.lower()), _held(until=NOW + timedelta(seconds=4)), NOW)
    assert again.outcome.body["expires_in_ms"] == 4000  # recovered: what is left, not the TTL
    assert again.outcome.body["token"] == T.lower()  # the spelling this request sent
    import json

    stored = json.dumps(body)
    later = replay(m, m.fingerprint, 200, stored, NOW + timedelta(seconds=m.ttl - 1.5))
    assert later.body["expires_in_ms"] == 1500
    gone = replay(m, m.fingerprint, 200, stored, NOW + timedelta(seconds=m.ttl + 9))
    assert gone.body["expires_in_ms"] == 0


def test_format_time_is_utc_with_offset_and_microseconds() -> None:
    plus_two = datetime(2026, 1, 1, 14, 0, tzinfo=UTC).astimezone(
        __import__("datetime").timezone(timedelta(hours=2))
    )
    assert format_time(plus_two) == "2026-01-01T14:00:00.000000+00:00"
