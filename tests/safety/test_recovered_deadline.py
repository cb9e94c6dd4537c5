"""A recovered acquisition's local deadline must count from the first try, not the recovery.

Found by the checker's ``guard-late`` rule (the local deadline may never be later than the
service's expiry). The service grants the lease when the first try
arrives; its answer is lost (here: the proxy cuts every answer after the server processed the
request), the SDK's single retry is cut too, and ``AcquireOutcomeUnknownError`` is raised. The
caller recovers a moment later with the error's token and request id, as documented. The
recovered lease's ``local_deadline`` used to be measured from the *recovery* call, later than
the service's expiry by the whole recovery delay, so a guard built on it said ``lost=False``
while the service already considered the lock free. Leases now carry ``expires_in_ms`` (what
is left, by the service's clock) and the SDK counts the deadline as send time + that.
"""

from __future__ import annotations

import time

import pytest

from tests.safety._checker import check
from tests.safety._history import Recorder, RecordingTransport
from tests.safety._proxy import ChaosProxy, Odds
from volcano_sdk import AcquireOutcomeUnknownError, VolcanoClient

TTL = 5
DELAY = 2.0


def test_recovered_lease_deadline_counts_from_the_first_try(sqlite_server) -> None:  # type: ignore[no-untyped-def]
    rec = Recorder(None, "w")
    proxy = ChaosProxy([("127.0.0.1", sqlite_server.process.port)]).start()
    try:
        with VolcanoClient(
            sqlite_server.anon_key,
            sqlite_server.service_key,
            proxy.url,
            transport=RecordingTransport(rec),
        ) as client:
            key = f"recover-{time.monotonic_ns()}"
            # A lease answered at once: it ties the service clock to the monotonic one.
            client.locks.release(key + "-clock", client.locks.acquire(key + "-clock", TTL))
            proxy.odds = Odds(cut=1.0)
            with pytest.raises(AcquireOutcomeUnknownError) as info:
                client.locks.acquire(key, TTL)
            proxy.odds = Odds()
            time.sleep(DELAY)
            err = info.value
            lease = client.locks.acquire(key, TTL, token=err.token, request_id=err.request_id)
            now = time.monotonic()
            rec.record(
                "info", "observe", key=key, token=lease.token, fence=lease.fencing_token,
                lost=now >= lease.local_deadline, t0=now, deadline=lease.local_deadline,
                ttl=TTL, expires=lease.expires_at.isoformat(),
            )  # fmt: skip
            client.locks.release(key, lease)
    finally:
        proxy.stop()
    assert check(rec.events) == []
