"""The checker on hand-made histories: a clean one passes, each planted violation is caught.

The clean history has every legitimate hard case in it: a takeover right after a release, a
takeover after expiry with the old holder writing a few milliseconds after the takeover but
before the new holder claimed (accepted, and legitimately so), the old holder's next write
refused, a force-release followed by a grant while the removed lease was still valid, and an
ambiguous acquisition recovered with the same token.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from tests.safety._checker import check, summarize
from tests.safety._history import Event

EPOCH = 1_800_000_000.0  # the service clock's origin in these histories


def iso(service_s: float) -> str:
    return datetime.datetime.fromtimestamp(EPOCH + service_s, datetime.UTC).isoformat()


class History:
    """Builds events; ``t`` is the monotonic clock, service times are seconds after EPOCH."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.n = 0

    def call(
        self, f: str, t0: float, t1: float | None, type_: str, p: str = "w1", **fields: Any
    ) -> str:
        self.n += 1
        op = f"{p}:{self.n}"
        invoke = {k: v for k, v in fields.items() if k in ("key", "token", "ttl", "rid", "fence")}
        invoke.setdefault("rid", f"rid-{self.n}")
        self.events.append({"t": t0, "p": p, "op": op, "type": "invoke", "f": f, **invoke})
        if t1 is not None:
            done = {"t": t1, "p": p, "op": op, "type": type_, "f": f, **invoke, **fields}
            self.events.append(done)
        return op

    def grant(self, t0: float, t1: float, token: str, fence: int, service: float, **kw: Any) -> str:
        return self.call(
            "acquire", t0, t1, "ok", key="k", token=token, ttl=5, fence=fence,
            expires=iso(service + 5), **kw,
        )  # fmt: skip

    def renew(self, t0: float, t1: float, token: str, fence: int, service: float) -> str:
        return self.call(
            "renew", t0, t1, "ok", key="k", token=token, ttl=5, fence=fence,
            expires=iso(service + 5),
        )  # fmt: skip

    def observe(
        self, t0: float, token: str, fence: int, lost: bool, deadline: float, service: float
    ) -> None:
        self.events.append(
            {
                "t": t0, "p": "w1", "type": "info", "f": "observe", "key": "k", "token": token,
                "fence": fence, "lost": lost, "t0": t0, "deadline": deadline, "ttl": 5,
                "expires": iso(service + 5),
            }
        )  # fmt: skip

    def claim(self, t0: float, token: str, fence: int, ok: bool = True) -> None:
        self.call("claim", t0, t0 + 0.005, "ok" if ok else "fail", key="k", token=token,
                  fence=fence)  # fmt: skip

    def write(self, t0: float, token: str, fence: int, old: int, type_: str = "ok") -> str:
        return self.call("write", t0, t0 + 0.005, type_, key="k", token=token, fence=fence,
                         old=old, new=old + 1)  # fmt: skip

    def resource(self, audit: list[list[Any]], value: int) -> None:
        self.events.append(
            {"t": 99.0, "p": "main", "type": "info", "f": "resource", "resource": "k",
             "backend": "sqlite", "value": value, "audit": audit}
        )  # fmt: skip


def clean(*, release_a: bool = True, b_late_write_ok: bool = True) -> tuple[History, dict]:
    """The clean history; returns the builder and the op ids a test may tamper with."""
    h = History()
    ids: dict[str, Any] = {}
    # A: an ambiguous acquisition (first try cut off), recovered with the same token.
    h.call("acquire", 0.0, 0.3, "unknown", key="k", token="a", ttl=5)
    h.events.append({"t": 0.31, "p": "w1", "type": "info", "f": "recover", "outcome": "granted"})
    h.grant(0.4, 0.41, "a", 1, service=100.0)
    h.observe(0.5, "a", 1, False, deadline=5.0, service=100.0)
    h.claim(0.6, "a", 1)
    ids["w_a"] = h.write(0.7, "a", 1, old=0)
    h.renew(1.6, 1.61, "a", 1, service=101.6)
    h.observe(1.7, "a", 1, False, deadline=6.6, service=101.6)
    if release_a:
        h.call("release", 2.0, 2.01, "ok", key="k", token="a", released=True)
    # B takes over right after the release, while A's lease would still have been valid.
    h.grant(2.1, 2.11, "b", 2, service=102.1)
    h.observe(2.2, "b", 2, False, deadline=7.1, service=102.1)
    h.claim(2.3, "b", 2)
    ids["w_b1"] = h.write(2.4, "b", 2, old=1)
    h.observe(7.2, "b", 2, True, deadline=7.1, service=102.1)  # B paused past its deadline
    # C is granted after B's lease expired by the service clock.
    h.grant(8.0, 8.01, "c", 3, service=108.0)
    # B, resumed, writes a few ms after the takeover, before C claimed: legitimately accepted.
    ids["w_b2"] = h.write(8.02, "b", 2, old=2, type_="ok" if b_late_write_ok else "fail")
    h.claim(8.5, "c", 3)
    ids["w_c"] = h.write(8.6, "c", 3, old=3)
    ids["w_b3"] = h.write(9.0, "b", 2, old=3, type_="fail")  # refused: C claimed
    h.call("renew", 9.1, 9.11, "fail", key="k", token="b", ttl=5, status=409, code="not_holder")
    # A force-release burst removes C's lease; D is granted while C's lease was still valid.
    h.call("force_release", 10.0, 10.01, "ok", key="k", removed=True, p="admin")
    h.grant(10.2, 10.21, "d", 4, service=110.2)
    h.resource(
        [
            [1, "claim", 1, "c1", None, None],
            [2, "write", 1, ids["w_a"], 0, 1],
            [3, "claim", 2, "c2", None, None],
            [4, "write", 2, ids["w_b1"], 1, 2],
            [5, "write", 2, ids["w_b2"], 2, 3],
            [6, "claim", 3, "c3", None, None],
            [7, "write", 3, ids["w_c"], 3, 4],
        ],
        value=4,
    )
    return h, ids


def kinds(h: History) -> set[str]:
    return {v.kind for v in check(h.events)}


def test_clean_history_passes() -> None:
    h, _ = clean()
    assert check(h.events) == []
    figures = summarize(h.events)
    assert figures["ambiguous_acquisitions"] == {"granted": 1}
    assert figures["increments_acknowledged"] == 4


def test_clean_history_passes_in_any_file_order() -> None:
    h, _ = clean()
    assert check(list(reversed(h.events))) == []


def test_fence_reused() -> None:
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 4, service=116.0)  # D's fence again, for a new owner
    assert "fence-reused" in kinds(h)


def test_fence_goes_down_by_service_clock() -> None:
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 1, service=116.0)
    assert "fence-order" in kinds(h)


def test_fence_goes_down_in_real_time_only() -> None:
    # Same service instant (a coarse clock), but E was asked for after D was acknowledged.
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 5, service=116.0)
    h.grant(12.1, 12.11, "f", 4, service=116.0)
    assert "fence-order" in kinds(h)


def test_grant_overlaps_a_valid_lease() -> None:
    h, _ = clean(release_a=False)  # nothing ended A's lease before B was granted
    assert kinds(h) == {"grant-overlap"}


def test_grant_a_microsecond_before_expiry_overlaps() -> None:
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 5, service=115.2 - 0.001)  # D valid until 115.2, no release
    assert "grant-overlap" in kinds(h)


def test_release_that_failed_does_not_justify_overlap() -> None:
    h, _ = clean(release_a=False)
    h.call("release", 2.0, 2.01, "fail", key="k", token="a", status=409)
    assert "grant-overlap" in kinds(h)


def test_force_release_sent_after_the_grant_does_not_justify_overlap() -> None:
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 5, service=112.0)  # D still valid until 115.2
    h.call("force_release", 12.5, 12.51, "ok", key="k", removed=True, p="admin")
    assert "grant-overlap" in kinds(h)


def test_recovery_with_a_different_fence() -> None:
    h, _ = clean()
    h.grant(0.45, 0.46, "a", 7, service=100.0)
    assert "recovery-inconsistent" in kinds(h)


def test_renewal_after_a_newer_grant() -> None:
    h, _ = clean()
    h.renew(8.3, 8.31, "b", 2, service=108.3)  # C was granted at 108.0
    assert "renew-inconsistent" in kinds(h)


def test_renewal_after_its_release() -> None:
    h, _ = clean()
    h.renew(2.02, 2.03, "a", 1, service=102.02)
    assert "renew-inconsistent" in kinds(h)


def test_renewal_revives_an_expired_lease() -> None:
    h, _ = clean()
    h.grant(12.0, 12.01, "e", 5, service=116.0)  # valid until 121.0, renewed at 121.5
    h.renew(17.5, 17.51, "e", 5, service=121.5)
    assert "renew-inconsistent" in kinds(h)


def test_renewal_with_the_wrong_fence() -> None:
    h, _ = clean()
    h.renew(2.5, 2.51, "b", 9, service=102.5)
    assert "renew-inconsistent" in kinds(h)


def test_release_of_a_superseded_lease_says_freed() -> None:
    h, _ = clean()
    h.call("release", 9.5, 9.51, "ok", key="k", token="b", released=True)  # C holds it
    assert "release-inconsistent" in kinds(h)


def test_release_by_a_token_that_never_held() -> None:
    h, _ = clean()
    h.call("acquire", 11.0, 11.01, "fail", key="k", token="z", ttl=5, status=409)
    h.call("release", 11.1, 11.11, "ok", key="k", token="z", released=True)
    assert "release-inconsistent" in kinds(h)


def test_double_release_both_freed() -> None:
    h, _ = clean()
    h.call("release", 2.05, 2.06, "ok", key="k", token="a", released=True)
    assert "release-inconsistent" in kinds(h)


def test_lost_update_in_the_audit() -> None:
    h, ids = clean()
    dump = h.events[-1]
    dump["audit"][6] = [7, "write", 3, ids["w_c"], 2, 3]  # C read a stale value
    dump["value"] = 3
    assert "lost-update" in kinds(h)


def test_acknowledged_write_missing() -> None:
    h, _ = clean()
    dump = h.events[-1]
    del dump["audit"][6]  # C's acknowledged write is gone
    dump["value"] = 3
    assert kinds(h) == {"lost-update"}


def test_final_value_differs() -> None:
    h, _ = clean()
    h.events[-1]["value"] = 3
    assert kinds(h) == {"lost-update"}


def test_stale_write_in_the_audit() -> None:
    h, ids = clean()
    dump = h.events[-1]
    dump["audit"].append([8, "write", 2, ids["w_b3"], 4, 5])
    dump["value"] = 5
    assert "stale-write" in kinds(h)


def test_stale_claim_in_the_audit() -> None:
    h, _ = clean()
    h.events[-1]["audit"].append([8, "claim", 2, "c9", None, None])
    assert "stale-write" in kinds(h)


def test_stale_write_acknowledged_after_newer_claim() -> None:
    h, ids = clean()
    for e in h.events:
        if e.get("op") == ids["w_b3"] and e["type"] == "fail":
            e["type"] = "ok"
    dump = h.events[-1]
    dump["audit"].append([8, "write", 2, ids["w_b3"], 4, 5])
    dump["value"] = 5
    assert "stale-write" in kinds(h)


def test_late_write_before_the_claim_is_legitimate() -> None:
    h, _ = clean()
    assert "stale-write" not in kinds(h)  # w_b2: after C's grant, before C's claim


def test_refused_write_applied() -> None:
    h, ids = clean()
    dump = h.events[-1]
    dump["audit"].append([8, "write", 3, ids["w_b3"], 4, 5])  # audited under C's fence
    dump["value"] = 5
    assert "phantom-write" in kinds(h)


def test_guard_not_lost_after_deadline() -> None:
    h, _ = clean()
    h.observe(7.15, "b", 2, False, deadline=7.1, service=102.1)
    assert kinds(h) == {"guard-late"}


def test_guard_not_lost_after_refused_renewal() -> None:
    h, _ = clean()
    # D's renewal is refused (C was force-released... and D's too), yet D keeps saying False.
    h.grant(12.0, 12.01, "e", 5, service=116.0)
    h.call("renew", 13.0, 13.01, "fail", key="k", token="e", ttl=5, status=409, code="x")
    h.observe(14.5, "e", 5, False, deadline=17.0, service=116.0)
    assert kinds(h) == {"guard-late"}


def test_guard_loss_is_final() -> None:
    h, _ = clean()
    h.observe(7.3, "b", 2, False, deadline=9.0, service=102.1)
    assert "guard-late" in kinds(h)


def test_guard_deadline_later_than_the_service_expiry() -> None:
    # Every answer here came back 10 ms after the service decided: A's lease, granted at 100.0
    # by the service clock and answered at 0.41, expires at 105.0, that is 5.01 at the latest.
    h, _ = clean()
    h.observe(0.55, "a", 1, False, deadline=5.4, service=100.0)
    assert kinds(h) == {"guard-late"}


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.75])
def test_truncated_history_does_not_crash(cut: float) -> None:
    h, _ = clean()
    check(h.events[: int(len(h.events) * cut)])
