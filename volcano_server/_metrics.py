"""Prometheus metrics of one server process, served at ``/metrics``.

Each app gets its own registry, so that several apps in one process (tests) do not collide.
With ``serve --workers N`` every worker process keeps its own counters; scrape each worker's
port, or run one worker per container behind the load balancer (docs/server.md).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Lock operations take from well under a millisecond (SQLite, no contention) to seconds
# (a database outage); the default buckets start at 5 ms and would hide the fast path.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.operations = Counter(
            "volcano_lock_operations",
            "Lock operations answered, by operation and result (ok, conflict, rejected, "
            "unavailable).",
            ["operation", "result"],
            registry=self.registry,
        )
        self.replays = Counter(
            "volcano_idempotent_replays",
            "Mutations answered from the idempotency record of an earlier request id.",
            ["operation"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "volcano_operation_duration_seconds",
            "Time to answer a lock operation, from routing to response.",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.storage_errors = Counter(
            "volcano_storage_errors",
            "Requests that found the database unavailable (answered 503).",
            registry=self.registry,
        )

    def observe(self, operation: str, status: int, seconds: float, *, replayed: bool) -> None:
        if status < 300:
            result = "ok"
        elif status == 409:
            result = "conflict"
        elif status == 503:
            result = "unavailable"
        else:
            result = "rejected"
        self.operations.labels(operation, result).inc()
        self.latency.labels(operation).observe(seconds)
        if replayed:
            self.replays.labels(operation).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
