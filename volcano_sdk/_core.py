"""The I/O-free core that the sync and async clients share.

Each lock call is a *flow*: a generator that validates its arguments, yields the requests (and
pauses) it needs, receives what came back, and returns the result or raises the mapped error.
The sync shell drives a flow with blocking calls, the async shell with awaits; neither holds any
logic of its own. The retry policy, lease construction, error mapping and the ``with_lock``
guard's state all live here, so both twins behave identically by construction.
"""

from __future__ import annotations

import datetime
import enum
import heapq
import json
import math
import random
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

import attrs

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
    TransportError,
    UnexpectedResponseError,
    ValidationError,
    VolcanoError,
)
from ._models import LockLease, LockList, LockState
from ._validation import check_key, check_key_text, check_lease, check_ttl, check_uuid_string

__all__ = [
    "Clock",
    "Flow",
    "GuardState",
    "NoReply",
    "Operation",
    "Outcome",
    "RenewalSchedule",
    "Reply",
    "Request",
    "Sleep",
    "Step",
    "acquire_flow",
    "check_wait",
    "force_release_flow",
    "get_flow",
    "list_flow",
    "release_flow",
    "renew_batch_flow",
    "renew_flow",
]

T = TypeVar("T")
G = TypeVar("G")
Clock = Callable[[], float]

# A 503's Retry-After is honoured before the single acquisition retry, but never for longer than
# this: the caller is blocked, and a second 503 ends the call anyway.
MAX_RETRY_PAUSE = 1.0
DEFAULT_503_PAUSE = 0.1


class Operation(enum.Enum):
    ACQUIRE = "acquire"
    GET = "get"
    RENEW = "renew"
    RELEASE = "release"
    FORCE_RELEASE = "force_release"
    LIST = "list"
    RENEW_BATCH = "renew_batch"


@attrs.frozen
class RenewItem:
    """One lease of a batch renewal."""

    key: str
    token: str = attrs.field(repr=False)
    ttl: int


@attrs.frozen
class Request:
    """One HTTP request of a flow in the SDK's terms; ``_adapter`` makes it a generated call."""

    operation: Operation
    key: str
    request_id: str
    token: str | None = attrs.field(default=None, repr=False)
    ttl: int | None = None
    timeout: float | None = None  # overrides the client's timeout for this request
    prefix: str | None = None  # list only
    after: str | None = None  # list only
    limit: int | None = None  # list only
    batch: tuple[RenewItem, ...] = ()  # renew_batch only

    @property
    def subject(self) -> str:
        """What the request is about, for messages: never a token."""
        return f"{self.operation.value} of {self.key!r}" if self.key else self.operation.value


@attrs.frozen
class Sleep:
    seconds: float


@attrs.frozen
class Reply:
    """An HTTP answer. ``parsed`` is the generated model of a 2xx body, or None if unreadable."""

    status: int
    # An acquire's answer holds the ownership token: kept out of reprs (tracebacks, Sentry).
    headers: Mapping[str, str] = attrs.field(repr=False)
    content: bytes = attrs.field(repr=False)
    parsed: object | None = attrs.field(default=None, repr=False)


@attrs.frozen
class NoReply:
    """No answer: the request may or may not have reached the service."""

    cause: Exception
    timed_out: bool


Step = Request | Sleep
Outcome = Reply | NoReply | None  # None answers a Sleep
Flow = Generator[Step, Outcome, T]


# -- What the generated models look like to the core (it never imports them) ------------------


class _LeaseBody(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def token(self) -> str: ...
    @property
    def fencing_token(self) -> int: ...
    @property
    def expires_at(self) -> datetime.datetime: ...
    @property
    def expires_in_ms(self) -> int: ...


class _StateBody(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def held(self) -> bool: ...
    @property
    def expires_at(self) -> datetime.datetime | None: ...
    @property
    def fencing_token(self) -> int | None: ...


class _ListBody(Protocol):
    @property
    def locks(self) -> Sequence[_StateBody]: ...
    @property
    def next_after(self) -> str | None: ...


class _BatchItemBody(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def lease(self) -> object: ...  # a lease body, or a falsy "unset" marker
    @property
    def error(self) -> object: ...  # an error body, or a falsy "unset" marker


class _BatchBody(Protocol):
    @property
    def results(self) -> Sequence[_BatchItemBody]: ...


class _ReleaseBody(Protocol):
    @property
    def released(self) -> bool: ...


class _ForceReleaseBody(Protocol):
    @property
    def removed(self) -> bool: ...


# -- Error mapping: the one boundary where answers become exceptions ---------------------------

_STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def _utc(value: datetime.datetime) -> datetime.datetime:
    if value.tzinfo is None:  # the contract says UTC; a naive value can only mean that
        return value.replace(tzinfo=datetime.UTC)
    return value.astimezone(datetime.UTC)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None  # an HTTP-date hint: not worth trusting the wall clock for
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def error_from_reply(reply: Reply, request: Request) -> APIStatusError:
    """Maps a non-2xx answer to the exception tree, reading the body leniently.

    Proxies answer with HTML, empty bodies or odd statuses (499, 520); all of them still become
    an ``APIStatusError`` with the status, never a decoding error.
    """
    detail: Mapping[str, object] = {}
    try:
        body = json.loads(reply.content) if reply.content else None
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        detail = body["error"]
    code = _text(detail.get("code"))
    message = _text(detail.get("message"))
    request_id = _text(detail.get("request_id")) or request.request_id
    status = reply.status
    cls = _STATUS_ERRORS.get(status) or (ServerError if status >= 500 else APIStatusError)
    text = f"{request.subject} failed: " + (message or f"HTTP {status}")
    if cls is ConflictError:
        expires_at = None
        raw_expiry = detail.get("expires_at")
        if isinstance(raw_expiry, str):
            try:
                expires_at = _utc(datetime.datetime.fromisoformat(raw_expiry))
            except ValueError:
                expires_at = None
        return ConflictError(
            text, status=status, code=code, request_id=request_id, expires_at=expires_at
        )
    if cls is ServiceUnavailableError or cls is RateLimitedError:
        return cls(
            text,
            status=status,
            code=code,
            request_id=request_id,
            retry_after=_retry_after(reply.headers),
        )
    return cls(text, status=status, code=code, request_id=request_id)


def error_from_no_reply(outcome: NoReply, request: Request) -> TransportError:
    cls = RequestTimeoutError if outcome.timed_out else TransportError
    what = "no answer in time" if outcome.timed_out else "connection failed"
    # The cause's own text names only the URL's host, never headers, so it is safe to show.
    return cls(
        f"{request.subject}: {what} ({type(outcome.cause).__name__})",
        request_id=request.request_id,
    )


def _is_success(outcome: Outcome) -> bool:
    return isinstance(outcome, Reply) and 200 <= outcome.status < 300


def _raise_for_failure(outcome: Outcome, request: Request) -> Reply:
    if isinstance(outcome, NoReply):
        raise error_from_no_reply(outcome, request) from outcome.cause
    if not isinstance(outcome, Reply):
        raise TypeError("a flow's request was answered with something other than an outcome")
    if not _is_success(outcome):
        raise error_from_reply(outcome, request)
    return outcome


def _parsed(reply: Reply, request: Request) -> object:
    if reply.parsed is None:
        raise UnexpectedResponseError(
            f"{request.subject}: HTTP {reply.status} with a body that does not match the contract",
            status=reply.status,
            request_id=request.request_id,
        )
    return reply.parsed


def _lease_from(body: _LeaseBody, *, sent_token: str, ttl: int, started: float) -> LockLease:
    # The service measured what is left after this call was first sent, so started + left is
    # never later than the real expiry; it is shorter than the TTL when an acquisition
    # recovered a lease granted earlier. No wall clock is involved.
    left = min(float(ttl), max(0, int(body.expires_in_ms)) / 1000)
    return LockLease(
        key=body.key,
        # The caller's exact spelling, even if a proxy or server changed its case on the way.
        token=sent_token,
        expires_at=_utc(body.expires_at),
        fencing_token=int(body.fencing_token),
        ttl=ttl,
        local_deadline=started + left,
    )


def _new_id(request_id: object | None) -> str:
    if request_id is None:
        return str(uuid.uuid4())
    return check_uuid_string(request_id, "request_id")


# -- Flows --------------------------------------------------------------------------------------


def _retry_pause(outcome: Outcome) -> float:
    if isinstance(outcome, Reply):
        hint = _retry_after(outcome.headers)
        return min(hint if hint is not None else DEFAULT_503_PAUSE, MAX_RETRY_PAUSE)
    return 0.0


def _retryable(outcome: Outcome) -> bool:
    return isinstance(outcome, NoReply) or (isinstance(outcome, Reply) and outcome.status == 503)


def acquire_flow(
    key: object,
    ttl: object,
    *,
    token: object | None,
    request_id: object | None,
    clock: Clock,
    wait: object | None = None,
    wall_clock: Callable[[], datetime.datetime] | None = None,
    jitter: Callable[[], float] = random.random,
) -> Flow[LockLease]:
    """Acquire, retrying a transport failure or a 503 once with the identical request.

    The retry carries the same token, request id, key, TTL and credential, so the service either
    replays the first answer (request id) or recognises the owner (token): a lease granted by a
    try whose answer was lost is recovered, never duplicated.

    With ``wait`` (seconds), a lock held by another owner is tried again with jittered backoff,
    woken early by the holder's expiry hint, until ``wait`` has passed; then its last
    ``ConflictError`` is raised. Each new attempt has a new request id, since the service would
    replay a used one's 409.
    """
    key = check_key(key)
    ttl = check_ttl(ttl)
    token = str(uuid.uuid4()) if token is None else check_uuid_string(token, "token")
    give_up_at = None if wait is None else clock() + check_wait(wait)
    request_id = _new_id(request_id)
    attempt = 0
    while True:
        try:
            return (yield from _acquire_once(key, ttl, token, request_id, clock))
        except ConflictError as conflict:
            now = clock()
            if give_up_at is None or conflict.code != "lock_held" or now >= give_up_at:
                raise
            hint = None
            if conflict.expires_at is not None:
                wall_now = (wall_clock or _utc_now)()
                hint = (conflict.expires_at - wall_now).total_seconds() + WAIT_HINT_SLACK
            yield Sleep(_wait_pause(attempt, hint, give_up_at - now, jitter()))
            attempt += 1
            request_id = str(uuid.uuid4())


# Backoff between attempts of a waiting acquisition: doubling from the first, up to the cap,
# with full jitter so that many waiters do not stampede the moment the lock frees.
WAIT_FIRST_PAUSE = 0.05
WAIT_MAX_PAUSE = 1.0
WAIT_HINT_SLACK = 0.005


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def check_wait(wait: object) -> float:
    if isinstance(wait, bool) or not isinstance(wait, int | float):
        raise TypeError(f"wait must be a number of seconds, not {type(wait).__name__}")
    if not math.isfinite(wait) or wait < 0:
        raise ValueError(f"wait must be a finite number of seconds >= 0, got {wait!r}")
    return float(wait)


def _wait_pause(attempt: int, hint: float | None, remaining: float, jitter: float) -> float:
    backoff = min(WAIT_FIRST_PAUSE * 2.0**attempt, WAIT_MAX_PAUSE) * (0.5 + jitter / 2)
    if hint is not None and 0 < hint < backoff:
        backoff = hint  # the holder's lease ends sooner than the backoff: try right then
    return max(0.0, min(backoff, remaining))


def _acquire_once(key: str, ttl: int, token: str, request_id: str, clock: Clock) -> Flow[LockLease]:
    request = Request(Operation.ACQUIRE, key, request_id, token=token, ttl=ttl)
    # The local deadline counts from the first try: a lease granted then expires first.
    started = clock()
    outcome = yield request
    uncertain = _retryable(outcome)
    if uncertain:
        pause = _retry_pause(outcome)
        if pause > 0:
            yield Sleep(pause)
        outcome = yield request
    if _retryable(outcome) or (isinstance(outcome, Reply) and outcome.status >= 500):
        raise _outcome_unknown(request, outcome, "the service could not confirm it")
    # After an uncertain first try, a refusal of the retry (429, 401, a proxy's 499...) says
    # nothing about whether the first was granted: keep the ids that can recover it. A 409 does
    # say: a lease granted to this token would have been returned, not refused.
    if uncertain and isinstance(outcome, Reply) and outcome.status >= 300 and outcome.status != 409:
        raise _outcome_unknown(request, outcome, "the retry was refused")
    reply = _raise_for_failure(outcome, request)
    try:
        body: _LeaseBody = _parsed(reply, request)  # type: ignore[assignment]
        return _lease_from(body, sent_token=token, ttl=ttl, started=started)
    except (VolcanoError, AttributeError, TypeError, ValueError) as exc:
        # A 2xx means the lease may well be ours: losing it to a parse error would leave the
        # lock blocked until it expires, so hand the caller what it needs to recover it.
        raise _outcome_unknown(request, outcome, "its answer was unreadable") from exc


def _outcome_unknown(request: Request, outcome: Outcome, why: str) -> AcquireOutcomeUnknownError:
    assert request.token is not None and request.ttl is not None
    cause: Exception | None = None
    status = None
    if isinstance(outcome, NoReply):
        cause = error_from_no_reply(outcome, request)
    elif isinstance(outcome, Reply):
        status = outcome.status
        if not _is_success(outcome):
            cause = error_from_reply(outcome, request)
    error = AcquireOutcomeUnknownError(
        f"acquisition of {request.key!r} may have succeeded but {why}; call acquire again with "
        "the error's token and request_id to recover the outcome",
        key=request.key,
        ttl=request.ttl,
        token=request.token,
        request_id=request.request_id,
        status=status,
    )
    error.__cause__ = cause
    return error


def _state_from(body: _StateBody) -> LockState:
    return LockState(
        key=body.key,
        held=bool(body.held),
        expires_at=None if body.expires_at is None else _utc(body.expires_at),
        fencing_token=None if body.fencing_token is None else int(body.fencing_token),
    )


def get_flow(key: object, *, request_id: object | None) -> Flow[LockState]:
    key = check_key(key)
    request = Request(Operation.GET, key, _new_id(request_id))
    reply = _raise_for_failure((yield request), request)
    body: _StateBody = _parsed(reply, request)  # type: ignore[assignment]
    return _state_from(body)


MAX_LIST_LIMIT = 1000


def list_flow(
    *, prefix: object | None, after: object | None, limit: object, request_id: object | None
) -> Flow[LockList]:
    prefix = None if prefix is None else check_key_text(prefix, "prefix")
    after = None if after is None else check_key_text(after, "after")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise ValueError(f"limit must be from 1 to {MAX_LIST_LIMIT}, got {limit}")
    request = Request(
        Operation.LIST,
        "",
        _new_id(request_id),
        prefix=prefix or None,
        after=after or None,
        limit=limit,
    )
    reply = _raise_for_failure((yield request), request)
    body: _ListBody = _parsed(reply, request)  # type: ignore[assignment]
    return LockList(
        locks=tuple(_state_from(item) for item in body.locks), next_after=body.next_after
    )


def renew_flow(
    key: object,
    lease: object,
    ttl: object,
    *,
    request_id: object | None,
    clock: Clock,
) -> Flow[LockLease]:
    key = check_key(key)
    lease = check_lease(lease, key)
    ttl = check_ttl(ttl)
    request = Request(Operation.RENEW, key, _new_id(request_id), token=lease.token, ttl=ttl)
    started = clock()
    reply = _raise_for_failure((yield request), request)
    body: _LeaseBody = _parsed(reply, request)  # type: ignore[assignment]
    return _lease_from(body, sent_token=lease.token, ttl=ttl, started=started)


# Leases renewed by one request; the service takes up to 500.
MAX_RENEW_BATCH = 200


def renew_batch_flow(
    leases: Sequence[LockLease], *, clock: Clock, timeout: float | None = None
) -> Flow[list[LockLease | VolcanoError]]:
    """Renews many leases (each for its own TTL) in one request; one result per lease.

    A failure of the whole request (transport, 503...) raises, as for a single renewal; a
    lease the service refused becomes its ``ConflictError`` in the list.
    """
    if not 1 <= len(leases) <= MAX_RENEW_BATCH:
        raise ValueError(f"a batch renews 1 to {MAX_RENEW_BATCH} leases, got {len(leases)}")
    request = Request(
        Operation.RENEW_BATCH,
        "",
        _new_id(None),
        timeout=timeout,
        batch=tuple(RenewItem(lease.key, lease.token, lease.ttl) for lease in leases),
    )
    started = clock()
    reply = _raise_for_failure((yield request), request)
    body: _BatchBody = _parsed(reply, request)  # type: ignore[assignment]
    if len(body.results) != len(leases):
        raise UnexpectedResponseError(
            f"renew_batch: {len(body.results)} results for {len(leases)} leases",
            status=reply.status,
            request_id=request.request_id,
        )
    results: list[LockLease | VolcanoError] = []
    for lease, item in zip(leases, body.results, strict=True):
        if item.status == 200 and item.lease:
            lease_body: _LeaseBody = item.lease  # type: ignore[assignment]
            results.append(
                _lease_from(lease_body, sent_token=lease.token, ttl=lease.ttl, started=started)
            )
            continue
        code = _text(getattr(item.error, "code", None))
        message = _text(getattr(item.error, "message", None)) or f"HTTP {item.status}"
        cls = _STATUS_ERRORS.get(item.status) or APIStatusError
        results.append(
            cls(
                f"renew of {lease.key!r} failed: {message}",
                status=item.status,
                code=code,
                request_id=request.request_id,
            )
        )
    return results


def release_flow(
    key: object, lease: object, *, request_id: object | None, timeout: float | None = None
) -> Flow[bool]:
    key = check_key(key)
    lease = check_lease(lease, key)
    request = Request(
        Operation.RELEASE, key, _new_id(request_id), token=lease.token, timeout=timeout
    )
    reply = _raise_for_failure((yield request), request)
    body: _ReleaseBody = _parsed(reply, request)  # type: ignore[assignment]
    return bool(body.released)


def force_release_flow(key: object, *, request_id: object | None) -> Flow[bool]:
    key = check_key(key)
    request = Request(Operation.FORCE_RELEASE, key, _new_id(request_id))
    reply = _raise_for_failure((yield request), request)
    body: _ForceReleaseBody = _parsed(reply, request)  # type: ignore[assignment]
    return bool(body.removed)


# -- The with_lock guard's state ------------------------------------------------------------------

# Renew once a third of the TTL has passed, leaving two thirds to ride out failed attempts.
RENEW_AT_FRACTION = 1 / 3
# Between failed renewal attempts; bounded so a short TTL still gets several tries.
MIN_RETRY_PAUSE = 0.2
MAX_RETRY_PAUSE_RENEWAL = 2.0


@attrs.define
class GuardState:
    """What a ``with_lock`` guard knows and does next; the shells add only threads or tasks.

    Not thread-safe by itself: the sync shell serialises access with its own lock.
    """

    key: str
    ttl: int
    lease: LockLease
    reason: LossReason | None = None
    closed: bool = False
    next_renewal_at: float = 0.0

    def __attrs_post_init__(self) -> None:
        self.next_renewal_at = self._renewal_time(self.lease)

    def _renewal_time(self, lease: LockLease) -> float:
        return lease.local_deadline - lease.ttl * (1 - RENEW_AT_FRACTION)

    def is_lost(self, now: float) -> bool:
        """True once ownership is known lost, or may be: the local deadline has passed.

        Loss is final: a renewal answered after the deadline does not make the guard trusted
        again, since protected work may already have stopped on it.
        """
        return self.loss_reason(now) is not None

    def loss_reason(self, now: float) -> LossReason | None:
        if self.reason is None and now >= self.lease.local_deadline:
            self.reason = LossReason.UNREACHABLE
        return self.reason

    def lost_wait(self, now: float, end: float | None) -> bool | float:
        """One step of ``wait_lost``: True once lost, False once ``end`` has passed, else how
        long to sleep before looking again (at most until the current local deadline, which
        moves on each renewal)."""
        if self.is_lost(now):
            return True
        wait = self.lease.local_deadline - now
        if end is not None:
            if now >= end:
                return False
            wait = min(wait, end - now)
        return max(wait, 0.0)

    def needs_renewal(self) -> bool:
        return not self.closed and self.reason is None

    def renewal_timeout(self, now: float, request_timeout: float) -> float:
        """A renewal attempt must give up before the local deadline, when it no longer helps."""
        return max(0.05, min(request_timeout, self.lease.local_deadline - now))

    def renewed(self, lease: LockLease, now: float) -> None:
        # Checked against the old deadline first: an answer that came too late stays a loss,
        # but its lease is kept so that exit releases the newest one.
        self.loss_reason(now)
        self.lease = lease
        self.next_renewal_at = self._renewal_time(lease)

    def renewal_failed(self, error: VolcanoError, now: float) -> None:
        """Decides between retrying (sets the next attempt time) and declaring loss."""
        if isinstance(error, ConflictError):
            self.reason = (
                LossReason.EXPIRED if error.code == "lease_expired" else LossReason.SUPERSEDED
            )
            return
        remaining = self.lease.local_deadline - now
        if remaining <= 0:
            self.reason = LossReason.UNREACHABLE
            return
        pause = min(max(MIN_RETRY_PAUSE, remaining / 8), MAX_RETRY_PAUSE_RENEWAL)
        self.next_renewal_at = now + min(pause, remaining)

    def release_flow(self, request_timeout: float) -> Flow[bool]:
        return release_flow(self.key, self.lease, request_id=None, timeout=request_timeout)

    def exit_error(self, now: float) -> VolcanoError | None:
        """The loss to raise when the block itself succeeded."""
        reason = self.loss_reason(now)
        if reason is None:
            return None
        return LockLostError(
            f"lost ownership of {self.key!r} while the block ran: {reason.value}",
            key=self.key,
            reason=reason,
        )


@attrs.define
class RenewalSchedule(Generic[G]):
    """Due times of many guards in one heap, so one thread or task serves them all."""

    _heap: list[tuple[float, int, G]] = attrs.field(factory=list)
    _counter: int = 0

    def push(self, due: float, guard: G) -> None:
        self._counter += 1  # ties break by insertion order; guards themselves don't compare
        heapq.heappush(self._heap, (due, self._counter, guard))

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[G]:
        due: list[G] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due

    def __len__(self) -> int:
        return len(self._heap)
