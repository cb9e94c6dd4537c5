"""The I/O-free core, driven by scripted outcomes: retry policy, leases, error mapping, guard."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from generated.models import Lease, LockState
from volcano_sdk import (
    AcquireOutcomeUnknownError,
    APIStatusError,
    AuthenticationError,
    ConflictError,
    LockLease,
    LossReason,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
    UnexpectedResponseError,
    ValidationError,
)
from volcano_sdk._core import (
    Flow,
    GuardState,
    NoReply,
    Operation,
    Outcome,
    RenewalSchedule,
    Reply,
    Request,
    Sleep,
    acquire_flow,
    get_flow,
    renew_batch_flow,
    renew_flow,
)

TOKEN = "6B29FC40-CA47-1067-B31D-00DD010662DA"
REQUEST_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
EXPIRY = datetime.datetime(2026, 11, 29, 12, 0, 30, tzinfo=datetime.UTC)


def lease_reply(token: str = TOKEN.lower(), fence: int = 7, left_ms: int = 30_000) -> Reply:
    body = Lease(
        key="daily-report",
        token=token,
        fencing_token=fence,
        expires_at=EXPIRY,
        expires_in_ms=left_ms,
    )
    return Reply(200, {}, json.dumps(body.to_dict()).encode(), parsed=body)


def error_reply(
    status: int, code: str | None = None, headers: dict[str, str] | None = None, **extra: object
) -> Reply:
    body = (
        {"error": {"code": code, "message": f"{code} happened", "request_id": REQUEST_ID, **extra}}
        if code
        else {}
    )
    return Reply(status, headers or {}, json.dumps(body).encode() if code else b"")


def drive(flow: Flow[Any], outcomes: list[Outcome]) -> tuple[Any, list[object]]:
    """Runs a flow against scripted outcomes; returns its result and every step it took."""
    steps: list[object] = []
    answers: Iterator[Outcome] = iter(outcomes)
    try:
        step = next(flow)
        while True:
            steps.append(step)
            step = flow.send(None if isinstance(step, Sleep) else next(answers))
    except StopIteration as done:
        return done.value, steps


def clock(now: float = 100.0) -> float:
    return now


def acquire(outcomes: list[Outcome], **kwargs: object) -> tuple[LockLease, list[object]]:
    flow = acquire_flow(
        "daily-report",
        30,
        token=kwargs.get("token", TOKEN),
        request_id=kwargs.get("request_id", REQUEST_ID),
        clock=clock,
    )
    return drive(flow, outcomes)


def test_acquire_builds_an_immutable_lease_with_the_callers_spelling() -> None:
    lease, steps = acquire([lease_reply()])
    assert lease.token == TOKEN  # not the lowercase the server echoed
    assert (lease.key, lease.fencing_token, lease.expires_at) == ("daily-report", 7, EXPIRY)
    assert lease.local_deadline == 100.0 + 30
    assert steps == [Request(Operation.ACQUIRE, "daily-report", REQUEST_ID, token=TOKEN, ttl=30)]
    with pytest.raises(AttributeError):
        lease.fencing_token = 8  # type: ignore[misc]


def test_recovered_lease_gets_the_time_left_not_the_ttl() -> None:
    lease, _ = acquire([lease_reply(left_ms=4_500)])
    assert lease.local_deadline == 100.0 + 4.5
    lease, _ = acquire([lease_reply(left_ms=90_000)])  # never more than the TTL asked for
    assert lease.local_deadline == 100.0 + 30


def test_acquire_generates_uuid4_strings_when_none_given() -> None:
    flow = acquire_flow("k", 30, token=None, request_id=None, clock=clock)
    request = next(flow)
    assert isinstance(request, Request)
    assert request.token and request.token == request.token.lower() and len(request.token) == 36
    assert request.request_id != request.token


@pytest.mark.parametrize(
    "first",
    [
        NoReply(httpx.ConnectError("refused"), timed_out=False),
        error_reply(503, "storage_unavailable"),
    ],
)
def test_acquire_retries_a_transport_failure_or_503_once_with_the_same_request(
    first: Outcome,
) -> None:
    lease, steps = acquire([first, lease_reply()])
    requests = [s for s in steps if isinstance(s, Request)]
    assert len(requests) == 2 and requests[0] == requests[1]
    assert lease.fencing_token == 7


def test_acquire_honours_retry_after_but_caps_the_pause() -> None:
    _, steps = acquire(
        [error_reply(503, "storage_unavailable", {"retry-after": "30"}), lease_reply()]
    )
    assert Sleep(1.0) in steps
    _, steps = acquire(
        [error_reply(503, "storage_unavailable", {"retry-after": "0.3"}), lease_reply()]
    )
    assert Sleep(0.3) in steps


def test_acquire_twice_unavailable_raises_outcome_unknown_with_recovery_ids() -> None:
    with pytest.raises(AcquireOutcomeUnknownError) as info:
        acquire([error_reply(503, "storage_unavailable"), error_reply(503, "storage_unavailable")])
    error = info.value
    assert (error.token, error.request_id, error.key, error.ttl) == (
        TOKEN,
        REQUEST_ID,
        "daily-report",
        30,
    )
    assert isinstance(error.__cause__, ServiceUnavailableError)
    assert TOKEN not in str(error) and TOKEN not in repr(error)


def test_acquire_timeout_twice_is_outcome_unknown_caused_by_timeout() -> None:
    timeout = NoReply(httpx.ReadTimeout("slow"), timed_out=True)
    with pytest.raises(AcquireOutcomeUnknownError) as info:
        acquire([timeout, timeout])
    assert isinstance(info.value.__cause__, RequestTimeoutError)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (error_reply(409, "lock_held", expires_at=EXPIRY.isoformat()), ConflictError),
        (error_reply(401, "unauthorized"), AuthenticationError),
        (error_reply(422, "validation_failed"), ValidationError),
        (error_reply(429, "rate_limited", {"retry-after": "2"}), RateLimitedError),
    ],
)
def test_acquire_does_not_retry_other_statuses(reply: Reply, error: type[Exception]) -> None:
    steps: list[object] = []
    with pytest.raises(error):
        flow = acquire_flow("daily-report", 30, token=TOKEN, request_id=REQUEST_ID, clock=clock)
        steps.append(next(flow))
        flow.send(reply)
    assert len(steps) == 1


def test_conflict_carries_the_current_expiry_and_code() -> None:
    with pytest.raises(ConflictError) as info:
        acquire([error_reply(409, "lock_held", expires_at=EXPIRY.isoformat())])
    assert info.value.expires_at == EXPIRY
    assert (info.value.status, info.value.code, info.value.request_id) == (
        409,
        "lock_held",
        REQUEST_ID,
    )


@pytest.mark.parametrize("status", [500, 502, 520])
def test_acquire_server_error_is_not_retried_but_is_recoverable(status: int) -> None:
    with pytest.raises(AcquireOutcomeUnknownError) as info:
        acquire([Reply(status, {}, b"<html>bad gateway</html>")])
    assert isinstance(info.value.__cause__, ServerError)
    assert info.value.status == status


def test_unreadable_2xx_to_acquire_keeps_the_lease_recoverable() -> None:
    with pytest.raises(AcquireOutcomeUnknownError) as info:
        acquire([Reply(200, {}, b"{}", parsed=None)])
    assert isinstance(info.value.__cause__, UnexpectedResponseError)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(499, {}, b""), APIStatusError),
        (Reply(503, {}, b"<html>upstream down</html>"), ServiceUnavailableError),
        (Reply(404, {}, b"not json"), APIStatusError),
        (Reply(401, {}, b'{"error": "flat string"}'), AuthenticationError),
    ],
)
def test_odd_answers_map_to_the_tree_without_decoding_errors(
    reply: Reply, error: type[Exception]
) -> None:
    flow = get_flow("k", request_id=REQUEST_ID)
    next(flow)
    with pytest.raises(error) as info:
        flow.send(reply)
    assert info.value.status == reply.status  # type: ignore[attr-defined]


def test_get_transport_failure_is_not_retried() -> None:
    flow = get_flow("k", request_id=None)
    next(flow)
    with pytest.raises(TransportError):
        flow.send(NoReply(httpx.ConnectError("refused"), timed_out=False))


def test_get_reads_state() -> None:
    body = LockState(key="k", held=False, expires_at=None, fencing_token=None)
    state, _ = drive(get_flow("k", request_id=None), [Reply(200, {}, b"", parsed=body)])
    assert (state.held, state.expires_at, state.fencing_token) == (False, None, None)


def test_renew_returns_a_new_lease_and_keeps_the_old_one() -> None:
    old, _ = acquire([lease_reply()])
    new, steps = drive(
        renew_flow("daily-report", old, 60, request_id=None, clock=lambda: 150.0),
        [lease_reply(left_ms=60_000)],
    )
    assert new is not old and old.local_deadline == 130.0 and new.local_deadline == 210.0
    assert steps[0].token == TOKEN and steps[0].ttl == 60  # type: ignore[attr-defined]


def test_renew_rejects_a_lease_of_another_key_before_sending() -> None:
    old, _ = acquire([lease_reply()])
    with pytest.raises(ValueError, match="lease is for key"):
        next(renew_flow("other", old, 30, request_id=None, clock=clock))


def test_renew_batch_gives_one_result_per_lease_in_order() -> None:
    from generated.models import ErrorDetail, RenewBatchItemResult, RenewBatchResult

    first, _ = acquire([lease_reply()])
    second, _ = acquire([lease_reply(fence=9)])
    renewed_body = lease_reply(fence=7).parsed
    body = RenewBatchResult(
        results=[
            RenewBatchItemResult(key="daily-report", status=200, lease=renewed_body),  # type: ignore[arg-type]
            RenewBatchItemResult(
                key="daily-report",
                status=409,
                error=ErrorDetail(code="lease_expired", message="gone", request_id="r"),
            ),
        ]
    )
    flow = renew_batch_flow([first, second], clock=lambda: 200.0, timeout=3.0)
    request = next(flow)
    assert isinstance(request, Request) and request.operation is Operation.RENEW_BATCH
    assert request.timeout == 3.0
    assert [(i.key, i.token, i.ttl) for i in request.batch] == [("daily-report", TOKEN, 30)] * 2
    with pytest.raises(StopIteration) as done:
        flow.send(Reply(200, {}, b"", parsed=body))
    renewed, refused = done.value.value
    assert renewed.fencing_token == 7 and renewed.local_deadline == 230.0
    assert isinstance(refused, ConflictError) and refused.code == "lease_expired"


def test_renew_batch_with_a_wrong_result_count_is_unexpected() -> None:
    from generated.models import RenewBatchResult

    lease, _ = acquire([lease_reply()])
    flow = renew_batch_flow([lease], clock=clock)
    next(flow)
    with pytest.raises(UnexpectedResponseError):
        flow.send(Reply(200, {}, b"", parsed=RenewBatchResult(results=[])))


def test_lease_repr_and_str_hide_the_token() -> None:
    lease, _ = acquire([lease_reply()])
    assert TOKEN not in repr(lease) and TOKEN.lower() not in str(lease)
    assert "fencing_token=7" in repr(lease)


# -- Guard state ---------------------------------------------------------------------------------


def guard(now: float = 100.0) -> GuardState:
    lease, _ = acquire([lease_reply()])
    return GuardState(key="daily-report", ttl=30, lease=lease)


def test_guard_renews_after_a_third_of_the_ttl() -> None:
    assert guard().next_renewal_at == pytest.approx(110.0)


def test_guard_is_lost_from_the_local_deadline_even_without_renewal_attempts() -> None:
    state = guard()
    assert not state.is_lost(129.9)
    assert state.is_lost(130.0)
    assert state.loss_reason(130.0) is LossReason.UNREACHABLE


def test_guard_retries_transient_failures_until_the_deadline() -> None:
    state = guard()
    state.renewal_failed(ServiceUnavailableError("down", status=503), now=111.0)
    assert state.reason is None and 111.0 < state.next_renewal_at < 130.0
    state.renewal_failed(TransportError("reset"), now=130.5)
    assert state.reason is LossReason.UNREACHABLE


@pytest.mark.parametrize(
    ("code", "reason"),
    [("lease_expired", LossReason.EXPIRED), ("not_holder", LossReason.SUPERSEDED)],
)
def test_guard_conflict_on_renewal_is_final(code: str, reason: LossReason) -> None:
    state = guard()
    state.renewal_failed(ConflictError("lost", status=409, code=code), now=111.0)
    assert state.reason is reason and not state.needs_renewal()


def test_a_renewal_answered_after_the_deadline_stays_lost() -> None:
    state = guard()
    late, _ = drive(
        renew_flow("daily-report", state.lease, 30, request_id=None, clock=lambda: 125.0),
        [lease_reply()],
    )
    state.renewed(late, now=131.0)
    assert state.is_lost(131.0) and state.lease is late


def test_exit_error_names_the_reason() -> None:
    state = guard()
    assert state.exit_error(120.0) is None
    error = state.exit_error(140.0)
    assert error is not None and error.reason is LossReason.UNREACHABLE


def test_renewal_schedule_pops_due_guards_in_time_order() -> None:
    schedule: RenewalSchedule[str] = RenewalSchedule()
    for due, name in [(3.0, "c"), (1.0, "a"), (2.0, "b"), (1.0, "a2")]:
        schedule.push(due, name)
    assert schedule.next_due() == 1.0
    assert schedule.pop_due(2.0) == ["a", "a2", "b"]
    assert len(schedule) == 1 and schedule.next_due() == 3.0


# -- Waiting acquisition ---------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def held_until(seconds_from_now: float) -> Reply:
    expiry = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        seconds=seconds_from_now
    )
    return error_reply(409, "lock_held", expires_at=expiry.isoformat())


def waiting_flow(wait: float, clock: FakeClock) -> Flow[LockLease]:
    return acquire_flow(
        "daily-report",
        30,
        token=TOKEN,
        request_id=REQUEST_ID,
        clock=clock,
        wait=wait,
        wall_clock=lambda: datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        jitter=lambda: 1.0,
    )


def test_waiting_acquire_backs_off_with_new_request_ids_until_it_gets_the_lock() -> None:
    clock = FakeClock()
    flow = waiting_flow(5.0, clock)
    first = next(flow)
    pauses, request_ids = [], [first.request_id]  # type: ignore[union-attr]
    step = flow.send(held_until(20))
    for _ in range(3):
        assert isinstance(step, Sleep)
        pauses.append(step.seconds)
        clock.now += step.seconds
        request = flow.send(None)
        request_ids.append(request.request_id)  # type: ignore[union-attr]
        step = flow.send(held_until(20))
    assert pauses == [0.05, 0.1, 0.2]  # doubling (jitter pinned to its maximum)
    assert request_ids[0] == REQUEST_ID and len(set(request_ids)) == 4
    clock.now += step.seconds  # type: ignore[union-attr]
    flow.send(None)
    with pytest.raises(StopIteration) as done:
        flow.send(lease_reply())
    assert done.value.value.token == TOKEN


def test_waiting_acquire_wakes_at_the_holders_expiry_hint() -> None:
    clock = FakeClock()
    flow = waiting_flow(5.0, clock)
    next(flow)
    for _ in range(5):  # the backoff grows past the hint; the hint then wins
        step = flow.send(held_until(0.3))
        clock.now += step.seconds  # type: ignore[union-attr]
        next_step = flow.send(None)
        assert isinstance(next_step, Request)
    assert step.seconds == pytest.approx(0.305)  # type: ignore[union-attr]


def test_waiting_acquire_gives_up_with_the_last_conflict() -> None:
    clock = FakeClock()
    flow = waiting_flow(0.3, clock)
    next(flow)
    with pytest.raises(ConflictError):
        for _ in range(20):
            step = flow.send(held_until(20))
            assert isinstance(step, Sleep) and clock.now + step.seconds <= 100.3 + 1e-9
            clock.now += step.seconds
            flow.send(None)


def test_wait_does_not_retry_other_conflicts() -> None:
    flow = waiting_flow(5.0, FakeClock())
    next(flow)
    with pytest.raises(AuthenticationError):
        flow.send(error_reply(401, "unauthorized"))


@pytest.mark.parametrize(
    ("wait", "error"),
    [(True, TypeError), ("1", TypeError), (-1, ValueError), (float("inf"), ValueError)],
)
def test_bad_wait_is_rejected_before_sending(wait: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        next(acquire_flow("k", 30, token=None, request_id=None, clock=clock, wait=wait))


@pytest.mark.parametrize("status", [429, 401, 499, 408])
def test_a_refused_retry_after_an_uncertain_try_keeps_the_recovery_ids(status: int) -> None:
    cut = NoReply(httpx.RemoteProtocolError("cut"), timed_out=False)
    with pytest.raises(AcquireOutcomeUnknownError) as info:
        acquire([cut, error_reply(status, "refused")])
    assert info.value.token == TOKEN and info.value.status == status


def test_a_conflict_on_the_retry_is_a_plain_conflict() -> None:
    cut = NoReply(httpx.RemoteProtocolError("cut"), timed_out=False)
    with pytest.raises(ConflictError):
        acquire([cut, error_reply(409, "lock_held")])


def test_reply_repr_hides_bodies_and_headers() -> None:
    reply = lease_reply(token=TOKEN)
    assert TOKEN not in repr(reply) and TOKEN.lower() not in repr(reply)


def test_lost_wait_steps() -> None:
    state = guard()  # local deadline 130
    assert state.lost_wait(100.0, None) == 30.0  # sleep until the deadline, then look again
    assert state.lost_wait(100.0, 105.0) == 5.0
    assert state.lost_wait(105.0, 105.0) is False  # the caller's timeout passed first
    assert state.lost_wait(130.0, None) is True
