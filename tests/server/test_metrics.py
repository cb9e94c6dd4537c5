"""GET /metrics: Prometheus counters and histograms of the lock operations (both backends)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer
from tests.server._api import Api, new_key, new_token


def scrape(server: LiveServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(server.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def delta(before: dict, after: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    k = (name, tuple(sorted(labels.items())))
    return after.get(k, 0.0) - before.get(k, 0.0)


def test_operations_replays_and_latency_are_counted(live_server: LiveServer) -> None:
    before = scrape(live_server)
    with Api.of(live_server) as api:
        key, token, rid = new_key(), new_token(), new_token()
        assert api.acquire(key, token, request_id=rid).status_code == 200
        assert api.acquire(key, token, request_id=rid).status_code == 200  # replayed
        assert api.acquire(key, new_token()).status_code == 409
        assert api.renew(key, token).status_code == 200
        assert api.acquire(key, "not-a-uuid").status_code == 422
        assert api.get(key).status_code == 200
        assert api.release(key, token).status_code == 200
        assert api.force_release(key).status_code == 200
    after = scrape(live_server)
    ops = "volcano_lock_operations_total"
    assert delta(before, after, ops, operation="acquire", result="ok") == 2
    assert delta(before, after, ops, operation="acquire", result="conflict") == 1
    assert delta(before, after, ops, operation="acquire", result="rejected") == 1
    assert delta(before, after, ops, operation="renew", result="ok") == 1
    assert delta(before, after, ops, operation="get", result="ok") == 1
    assert delta(before, after, ops, operation="release", result="ok") == 1
    assert delta(before, after, ops, operation="force_release", result="ok") == 1
    assert delta(before, after, "volcano_idempotent_replays_total", operation="acquire") == 1
    count = "volcano_operation_duration_seconds_count"
    assert delta(before, after, count, operation="acquire") == 4
    assert token not in httpx.get(live_server.url + "/metrics").text
