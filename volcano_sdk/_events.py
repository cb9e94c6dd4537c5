"""Lock events for the ``on_event`` hook: export your own metrics or logs from them."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

import attrs

from ._errors import LossReason
from ._models import LockLease

__all__ = [
    "EventHook",
    "LockEvent",
    "LockEventKind",
    "acquired",
    "emit",
    "lost",
    "released",
    "renewed",
]

logger = logging.getLogger("volcano_sdk")


class LockEventKind(enum.Enum):
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    LOST = "lost"
    RELEASED = "released"


@attrs.frozen
class LockEvent:
    """One thing that happened to a lease. It never carries the ownership token.

    ``margin`` (on ``renewed``) is how many seconds were left before the old lease's local
    deadline when the renewal came back: a shrinking margin warns of trouble before loss.
    ``reason`` is set on ``lost``.
    """

    kind: LockEventKind
    key: str
    fencing_token: int | None
    margin: float | None = None
    reason: LossReason | None = None


EventHook = Callable[[LockEvent], None]


def emit(hook: EventHook | None, event: LockEvent) -> None:
    logger.debug("lock %s: %r fence=%s", event.kind.value, event.key, event.fencing_token)
    if hook is None:
        return
    try:
        hook(event)
    except Exception:
        # A broken metrics exporter must not break lock handling (or a renewal thread).
        logger.exception("the on_event hook raised for %s of %r", event.kind.value, event.key)


def acquired(lease: LockLease) -> LockEvent:
    return LockEvent(LockEventKind.ACQUIRED, lease.key, lease.fencing_token)


def renewed(old: LockLease, new: LockLease, now: float) -> LockEvent:
    return LockEvent(
        LockEventKind.RENEWED, new.key, new.fencing_token, margin=old.local_deadline - now
    )


def released(lease: LockLease) -> LockEvent:
    return LockEvent(LockEventKind.RELEASED, lease.key, lease.fencing_token)


def lost(lease: LockLease, reason: LossReason) -> LockEvent:
    return LockEvent(LockEventKind.LOST, lease.key, lease.fencing_token, reason=reason)
