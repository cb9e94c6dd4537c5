"""The checker: reads a merged history (see ``_history``) and lists every safety violation.

Two clocks meet here and are never mixed in one comparison:

- the *service clock* (the database's): a granted or renewed lease says ``expires_at``, so the
  service's "now" when it decided was ``expires_at - ttl``. Expiry is decided on this clock, so
  "was the earlier lease still valid when the next one was granted?" is asked on it alone;
- the *monotonic clock* of the machine (``t`` of every event): real-time order between
  operations ("A's answer came back before B was sent") and the SDK's local deadlines.

What is checked (the violation ``kind`` in brackets):

1. Fencing tokens. One token per ownership period [fence-reused]; grants ordered by the service
   clock, and grants that follow each other in real time, have strictly increasing fences
   [fence-order]; recovering an acquisition with the same ownership token yields the same
   fence [recovery-inconsistent].
2. Mutual exclusion [grant-overlap]: a grant may start while an earlier holder's lease was
   still valid by the service clock only if that lease was ended first: released by its holder
   or force-released by a request sent before the new grant was acknowledged. Overlap in the
   *belief* of a paused or cut-off holder is not a violation; what it may do is item 4.
3. Acknowledged renewals and releases [renew-inconsistent, release-inconsistent]: a renewal
   carries its grant's fence, never follows a newer grant on the service clock, never follows
   an acknowledged release, and never revives an expired lease; a release that says it freed
   a lease was never superseded before it was sent, and belongs to a token that may hold it.
4. The protected resource, from its own audit log and from the history [lost-update,
   stale-write, phantom-write]: the stored fence never goes down (a claim with a lower fence
   is refused), a write is accepted only under the latest claim's fence, every write read the
   value of the write before it, the final value is the last write's, every acknowledged write
   is there and no refused one is. A write acknowledged after a newer claim had been
   acknowledged is a stale write. A write by the old holder *after* a takeover but *before*
   the new holder claimed is legitimate and not flagged: the fence has not moved yet.
5. Guards and local deadlines [guard-late]: an observation ``lost=False`` never comes at or
   after the guard's local deadline, nor more than ``NOTICE_SLACK`` after a renewal was
   refused, nor after an earlier ``lost=True`` (loss is final); and a local deadline is never
   later than the service's expiry of the lease, mapped to the monotonic clock by the offset
   that every acknowledged lease bounds (see ``_build_clock_map``).
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.safety._history import Event, parse_time

__all__ = ["NOTICE_SLACK", "Violation", "check", "summarize"]

# How long a guard may take, after a renewal came back 409, to report the loss. The SDK sets it
# in the same thread right after the answer; this only absorbs scheduling on a loaded machine.
NOTICE_SLACK = 1.0
# The service-to-monotonic clock offset is estimated from the requests within 3 buckets.
CLOCK_BUCKET = 10.0
EPSILON = 1e-6

WIRE = {"acquire", "renew", "release", "force_release", "get"}


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


@dataclass
class Op:
    """An invocation paired with its completion (``type`` None: it never completed)."""

    f: str
    op: str
    process: str
    invoke: Event
    done: Event | None = None

    @property
    def type(self) -> str:
        return "unknown" if self.done is None else str(self.done["type"])

    @property
    def t_invoke(self) -> float:
        return float(self.invoke["t"])

    @property
    def t_done(self) -> float | None:
        return None if self.done is None else float(self.done["t"])

    def get(self, name: str) -> Any:
        if self.done is not None and name in self.done:
            return self.done[name]
        return self.invoke.get(name)


@dataclass
class Grant:
    key: str
    token: str
    fence: int
    ttl: int
    start: float  # service clock: when the service granted it
    expires: float  # service clock: the expiry it granted
    t_first_invoke: float  # monotonic: the first acquisition request with this token
    t_ok: float  # monotonic: the first acknowledgement
    valid_until: float = 0.0  # service clock: the latest acknowledged expiry (renewals too)
    ops: list[Op] = field(default_factory=list)


def pair(events: Iterable[Event]) -> list[Op]:
    ops: dict[str, Op] = {}
    for e in events:
        op_id = e.get("op")
        if op_id is None:
            continue
        if e["type"] == "invoke":
            ops[op_id] = Op(e["f"], op_id, e["p"], e)
        elif op_id in ops and ops[op_id].done is None:
            ops[op_id].done = e
    return list(ops.values())


def _service_start(op: Op) -> float:
    return parse_time(op.get("expires")) - float(op.get("ttl"))


class _Checker:
    def __init__(self, events: list[Event]) -> None:
        self.events = sorted(events, key=lambda e: e["t"])
        self.ops = pair(self.events)
        self.violations: list[Violation] = []
        self.by_f: dict[str, list[Op]] = defaultdict(list)
        for op in self.ops:
            self.by_f[op.f].append(op)
        self.grants: dict[str, list[Grant]] = defaultdict(list)  # key -> by fence
        self.grant_of: dict[tuple[str, str], Grant] = {}  # (key, token) -> grant
        self.releases_of: dict[tuple[str, str], list[Op]] = defaultdict(list)
        for op in self.by_f["release"]:
            self.releases_of[(op.get("key"), op.get("token"))].append(op)
        self.acquires_of: dict[tuple[str, str], list[Op]] = defaultdict(list)
        for op in self.by_f["acquire"]:
            self.acquires_of[(op.get("key"), op.get("token"))].append(op)
        self.force_of: dict[str, list[Op]] = defaultdict(list)
        for op in self.by_f["force_release"]:
            self.force_of[op.get("key")].append(op)

    def flag(self, kind: str, message: str) -> None:
        self.violations.append(Violation(kind, message))

    # -- grants and fences ---------------------------------------------------------------------

    def build_grants(self) -> None:
        first_invoke: dict[tuple[str, str], float] = {}
        for op in self.by_f["acquire"]:
            k = (op.get("key"), op.get("token"))
            first_invoke[k] = min(first_invoke.get(k, op.t_invoke), op.t_invoke)
        for op in sorted(self.by_f["acquire"], key=lambda o: o.t_done or 0.0):
            if op.type != "ok":
                continue
            key, token, fence = op.get("key"), op.get("token"), int(op.get("fence"))
            grant = self.grant_of.get((key, token))
            if grant is None:
                grant = Grant(
                    key=key,
                    token=token,
                    fence=fence,
                    ttl=int(op.get("ttl")),
                    start=_service_start(op),
                    expires=parse_time(op.get("expires")),
                    t_first_invoke=first_invoke[(key, token)],
                    t_ok=op.t_done or op.t_invoke,
                )
                grant.valid_until = grant.expires
                self.grant_of[(key, token)] = grant
                self.grants[key].append(grant)
            elif grant.fence != fence:
                self.flag(
                    "recovery-inconsistent",
                    f"{key}: one ownership token was acknowledged with fences {grant.fence} "
                    f"and {fence}",
                )
            grant.ops.append(op)
        for op in self.by_f["renew"]:
            if op.type == "ok":
                grant = self.grant_of.get((op.get("key"), op.get("token")))
                if grant is not None and int(op.get("fence")) == grant.fence:
                    grant.valid_until = max(grant.valid_until, parse_time(op.get("expires")))
        for grants in self.grants.values():
            grants.sort(key=lambda g: g.fence)

    def check_fences(self) -> None:
        for key, grants in self.grants.items():
            seen: dict[int, Grant] = {}
            for g in grants:
                if g.fence in seen:
                    self.flag(
                        "fence-reused",
                        f"{key}: fence {g.fence} was granted to two different owners",
                    )
                seen[g.fence] = g
            by_start = sorted(grants, key=lambda g: (g.start, g.fence))
            for a, b in itertools.pairwise(by_start):
                if a.fence >= b.fence:
                    self.flag(
                        "fence-order",
                        f"{key}: fence {b.fence} granted after fence {a.fence} by the service "
                        f"clock ({b.start - a.start:.6f}s later)",
                    )
            # Real time: a grant acknowledged before another was first asked for is older.
            by_ok = sorted(grants, key=lambda g: g.t_ok)
            oks = [g.t_ok for g in by_ok]
            best: list[Grant] = []
            for g in by_ok:
                if not best or g.fence > best[-1].fence:
                    best.append(g)
                else:
                    best.append(best[-1])
            for b in grants:
                i = bisect.bisect_left(oks, b.t_first_invoke)
                if i > 0 and best[i - 1].fence >= b.fence:
                    self.flag(
                        "fence-order",
                        f"{key}: fence {b.fence} was asked for after fence "
                        f"{best[i - 1].fence} had been acknowledged",
                    )

    # -- mutual exclusion --------------------------------------------------------------------

    def _ended_before(self, p: Grant, n: Grant) -> bool:
        """Was p's lease possibly ended (release, force-release) before n was acknowledged?"""
        for op in self.releases_of.get((p.key, p.token), []):
            if op.type != "fail" and op.get("released") is not False and op.t_invoke < n.t_ok:
                return True
        for op in self.force_of.get(p.key, []):
            if (
                op.type != "fail"
                and op.get("removed") is not False
                and op.t_invoke < n.t_ok
                and (op.t_done is None or op.t_done > p.t_first_invoke)
            ):
                return True
        return False

    def check_overlap(self) -> None:
        for key, grants in self.grants.items():
            for j, n in enumerate(grants):
                for p in grants[:j]:
                    if p.valid_until > n.start + EPSILON and not self._ended_before(p, n):
                        self.flag(
                            "grant-overlap",
                            f"{key}: fence {n.fence} was granted while fence {p.fence} was "
                            f"valid for {p.valid_until - n.start:.3f}s more by the service "
                            "clock, and nothing released it",
                        )

    # -- renewals and releases -------------------------------------------------------------

    def _may_hold(self, key: str, token: str) -> bool:
        return any(op.type != "fail" for op in self.acquires_of.get((key, token), []))

    def check_renewals(self) -> None:
        unsure = {
            (op.get("key"), op.get("token"))
            for op in self.by_f["renew"] + self.by_f["acquire"]
            if op.type == "unknown"
        }
        renewals: dict[tuple[str, str], list[Op]] = defaultdict(list)
        for op in self.by_f["renew"]:
            if op.type != "ok":
                continue
            key, token, fence = op.get("key"), op.get("token"), int(op.get("fence"))
            renewals[(key, token)].append(op)
            where = f"{key}: renewal of fence {fence}"
            grant = self.grant_of.get((key, token))
            if grant is None:
                if not self._may_hold(key, token):
                    self.flag("renew-inconsistent", f"{where} by a token that never held it")
                continue
            if grant.fence != fence:
                self.flag("renew-inconsistent", f"{where}, but the token was granted fence "
                          f"{grant.fence}")  # fmt: skip
            start = _service_start(op)
            for n in self.grants[key]:
                if n.fence > grant.fence and n.start <= start:
                    self.flag(
                        "renew-inconsistent",
                        f"{where} acknowledged {start - n.start:.3f}s after fence {n.fence} "
                        "was granted",
                    )
                    break
            for rel in self.releases_of.get((key, token), []):
                freed = rel.type == "ok" and rel.get("released")
                if freed and rel.t_done is not None and rel.t_done < op.t_invoke:
                    self.flag("renew-inconsistent", f"{where} after its release")
                    break
        # No renewal revives an expired lease (unless an unanswered request may have extended it).
        for (key, token), ops in renewals.items():
            grant = self.grant_of.get((key, token))
            if grant is None or (key, token) in unsure:
                continue
            expiry = grant.expires
            for op in sorted(ops, key=_service_start):
                start = _service_start(op)
                if start >= expiry + EPSILON:
                    self.flag(
                        "renew-inconsistent",
                        f"{key}: fence {grant.fence} renewed {start - expiry:.3f}s after it "
                        "expired",
                    )
                expiry = max(expiry, parse_time(op.get("expires")))

    def check_releases(self) -> None:
        freed: dict[tuple[str, str], list[Op]] = defaultdict(list)
        for op in sorted(self.by_f["release"], key=lambda o: o.t_invoke):
            if op.type != "ok" or not op.get("released"):
                continue
            key, token = op.get("key"), op.get("token")
            if not self._may_hold(key, token):
                self.flag("release-inconsistent", f"{key}: a token that never held it released it")
                continue
            mine = self.grant_of.get((key, token))
            for n in self.grants[key]:
                newer = n.token != token and (mine is None or n.fence > mine.fence)
                if newer and n.t_ok < op.t_invoke:
                    self.flag(
                        "release-inconsistent",
                        f"{key}: a release said it freed a lease that fence {n.fence} had "
                        "superseded before the release was sent",
                    )
                    break
            for earlier in freed[(key, token)]:
                assert earlier.t_done is not None
                if earlier.get("rid") != op.get("rid") and earlier.t_done < op.t_invoke:
                    self.flag("release-inconsistent", f"{key}: one lease released twice")
                    break
            freed[(key, token)].append(op)

    # -- the protected resource -------------------------------------------------------------

    def check_resources(self) -> None:
        dumps = [e for e in self.events if e["type"] == "info" and e["f"] == "resource"]
        writes = list(self.by_f["write"])
        claims = [op for op in self.by_f["claim"] if op.type == "ok"]
        writes_of: dict[str, list[Op]] = defaultdict(list)
        for op in writes:
            writes_of[op.get("key")].append(op)
        for dump in dumps:
            resource = dump["resource"]
            audit = sorted(dump["audit"], key=lambda row: row[0])
            top = 0
            claimed = 0
            value = 0
            accepted: set[str] = set()
            for _seq, kind, fence, op_id, old, new in audit:
                if kind == "claim":
                    if fence < top:
                        self.flag(
                            "stale-write",
                            f"{resource}: claim with fence {fence} accepted after fence {top}",
                        )
                    top = max(top, fence)
                    claimed = fence
                    continue
                accepted.add(op_id)
                if fence != claimed or fence < top:
                    self.flag(
                        "stale-write",
                        f"{resource}: write with fence {fence} accepted while the stored "
                        f"fence was {max(top, claimed)}",
                    )
                if old != value:
                    self.flag(
                        "lost-update",
                        f"{resource}: a write read {old} but the value was {value}: the "
                        "updates in between were lost",
                    )
                value = new
            if dump["value"] != value:
                self.flag(
                    "lost-update",
                    f"{resource}: final value {dump['value']}, the accepted writes make {value}",
                )
            for op in writes_of.get(resource, []):
                if op.type == "ok" and op.op not in accepted:
                    self.flag("lost-update", f"{resource}: acknowledged write {op.op} is missing")
                if op.type == "fail" and op.op in accepted:
                    self.flag("phantom-write", f"{resource}: refused write {op.op} was applied")
        # From the history alone: a write acknowledged after a newer claim was acknowledged.
        by_key: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for c in claims:
            assert c.t_done is not None
            by_key[c.get("key")].append((c.t_done, int(c.get("fence"))))
        for key in by_key:
            by_key[key].sort()
        highest: dict[str, tuple[list[float], list[int]]] = {}
        for key, seq in by_key.items():
            running, tops = 0, []
            for _t, claim_fence in seq:
                running = max(running, claim_fence)
                tops.append(running)
            highest[key] = ([t for t, _ in seq], tops)
        for op in writes:
            if op.type != "ok" or op.get("key") not in highest:
                continue
            fence = int(op.get("fence"))
            times, tops = highest[op.get("key")]
            i = bisect.bisect_left(times, op.t_invoke)
            if i > 0 and tops[i - 1] > fence:
                self.flag(
                    "stale-write",
                    f"{op.get('key')}: write with fence {fence} accepted after fence "
                    f"{tops[i - 1]} had claimed the resource",
                )

    # -- guards ------------------------------------------------------------------------------

    def check_guards(self) -> None:
        observations = [e for e in self.events if e["type"] == "info" and e["f"] == "observe"]
        refused: dict[tuple[str, str], float] = {}
        for op in self.by_f["renew"]:
            if op.type == "fail" and op.get("status") == 409:
                k = (op.get("key"), op.get("token"))
                assert op.t_done is not None
                refused[k] = min(refused.get(k, op.t_done), op.t_done)
        self._build_clock_map()
        lost_at: dict[tuple[str, str], float] = {}
        for e in observations:
            key, token, t0 = e["key"], e["token"], float(e["t0"])
            k = (key, token)
            where = f"{key}: guard of fence {e.get('fence')}"
            if e["lost"]:
                lost_at.setdefault(k, t0)
                continue
            if k in lost_at and lost_at[k] <= t0:
                self.flag("guard-late", f"{where} said lost=False after it had said lost=True")
            if t0 >= float(e["deadline"]):
                self.flag(
                    "guard-late",
                    f"{where} said lost=False {t0 - float(e['deadline']):.3f}s after its local "
                    "deadline",
                )
            if k in refused and t0 > refused[k] + NOTICE_SLACK:
                self.flag(
                    "guard-late",
                    f"{where} said lost=False {t0 - refused[k]:.3f}s after a renewal was refused",
                )
            self._check_deadline(e, where)

    def _build_clock_map(self) -> None:
        """Lower bounds of (service clock - monotonic clock), per CLOCK_BUCKET seconds.

        A lease answer says the service decided at ``expires - ttl`` (or later: a recovery or a
        replay echoes an older lease), and it decided before the answer came back, so
        ``offset >= expires - ttl - t_done``. The best of these over nearby requests is within
        a round trip of the true offset; both clocks tick at one rate on one machine.
        """
        self.clock_lo: dict[int, float] = {}
        for op in self.by_f["acquire"] + self.by_f["renew"]:
            if op.type == "ok" and op.t_done is not None:
                bound = _service_start(op) - op.t_done
                bucket = int(op.t_done // CLOCK_BUCKET)
                self.clock_lo[bucket] = max(self.clock_lo.get(bucket, bound), bound)

    def _offset_lo(self, t: float) -> float | None:
        b = int(t // CLOCK_BUCKET)
        near = [self.clock_lo[i] for i in range(b - 3, b + 4) if i in self.clock_lo]
        return max(near) if near else None

    def _check_deadline(self, e: Event, where: str) -> None:
        """The local deadline is never later than the service's expiry, on the monotonic clock."""
        if e.get("expires") is None:
            return
        offset_lo = self._offset_lo(float(e["t0"]))
        if offset_lo is None:
            return
        latest = parse_time(e["expires"]) - offset_lo  # the service's expiry at the latest
        deadline = float(e["deadline"])
        if deadline > latest + EPSILON:
            self.flag(
                "guard-late",
                f"{where}: local deadline {deadline - latest:.3f}s later than the service's "
                "expiry of its lease",
            )

    def run(self) -> list[Violation]:
        self.build_grants()
        self.check_fences()
        self.check_overlap()
        self.check_renewals()
        self.check_releases()
        self.check_resources()
        self.check_guards()
        return self.violations


def check(events: Iterable[Event]) -> list[Violation]:
    """Every violation in the history; an empty list means the run was safe."""
    return _Checker(list(events)).run()


def summarize(events: Iterable[Event]) -> dict[str, Any]:
    """The figures of a run: operations by kind and outcome, faults, recoveries."""
    events = list(events)
    ops = pair(events)
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for op in ops:
        outcomes[op.f][op.type] += 1
    faults: dict[str, int] = defaultdict(int)
    recoveries: dict[str, int] = defaultdict(int)
    for e in events:
        if e["type"] == "info" and e["f"] == "fault" and e.get("phase") == "start":
            faults[e["kind"]] += 1
        if e["type"] == "info" and e["f"] == "recover":
            recoveries[e["outcome"]] += 1
    # How often the hard cases happened (the checker accepted each of them).
    checker = _Checker(events)
    checker.build_grants()
    late = 0
    for op in checker.by_f["write"]:
        if op.type != "ok":
            continue
        fence = int(op.get("fence"))
        if any(g.fence > fence and g.t_ok < op.t_invoke for g in checker.grants[op.get("key")]):
            late += 1
    stale = sum(
        1 for op in checker.by_f["claim"] + checker.by_f["write"]
        if op.type == "fail" and (op.f == "claim" or op.get("why") == "stale")
    )  # fmt: skip
    noticed = {
        (e["key"], e["token"]) for e in events if e["f"] == "observe" and e.get("lost") is True
    }
    processes = {e["p"] for e in events}
    times = [e["t"] for e in events]
    return {
        "events": len(events),
        "processes": len(processes),
        "span_s": round(max(times) - min(times), 1) if times else 0.0,
        "operations": {f: dict(v) for f, v in sorted(outcomes.items())},
        "wire_requests": sum(sum(v.values()) for f, v in outcomes.items() if f in WIRE),
        "faults": dict(sorted(faults.items())),
        "ambiguous_acquisitions": dict(sorted(recoveries.items())),
        "increments_acknowledged": outcomes["write"]["ok"],
        "stale_holders_refused_by_resource": stale,
        "writes_after_takeover_before_claim": late,
        "holders_that_saw_their_loss": len(noticed),
    }
