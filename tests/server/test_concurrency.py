"""Races: 16 clients for one key, on one server and on two replicas of one database."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests._server_process import ServerProcess, create_project
from tests.server._api import Api, new_key, new_token

CLIENTS = 16
ROUNDS = 8


def _race(urls: list[str], keys: tuple[str, str]) -> list[int]:
    """ROUNDS rounds of CLIENTS simultaneous acquisitions of one key; the winners' fences."""
    key = new_key("race")
    barrier = threading.Barrier(CLIENTS, timeout=20)
    results: list[list[tuple[int, int | None, str]]] = [[] for _ in range(ROUNDS)]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            with Api(urls[i % len(urls)], *keys) as api:
                api.client.get("/health")  # connect before the first round starts
                for round_ in range(ROUNDS):
                    token = new_token()
                    barrier.wait()
                    r = api.acquire(key, token, ttl=60)
                    fence = r.json().get("fencing_token") if r.status_code == 200 else None
                    results[round_].append((r.status_code, fence, token))
                    barrier.wait()  # everyone has tried; now the winner lets go
                    if r.status_code == 200:
                        assert api.release(key, token).json()["released"] is True
                    barrier.wait()
        except BaseException as exc:  # surfaced below, with the barrier broken for the rest
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    fences = []
    for round_, outcomes in enumerate(results):
        statuses = sorted(status for status, _, _ in outcomes)
        assert statuses == [200] + [409] * (CLIENTS - 1), (round_, statuses)
        fences += [fence for status, fence, _ in outcomes if status == 200]  # type: ignore[misc]
    return fences


def test_one_winner_per_round(live_server) -> None:  # type: ignore[no-untyped-def]
    fences = _race([live_server.url], (live_server.anon_key, live_server.service_key))
    assert fences == list(range(1, ROUNDS + 1))


@pytest.fixture(params=["postgres", "sqlite"])
def two_replicas(
    request: pytest.FixtureRequest, new_database: Callable[[str], str]
) -> Iterator[tuple[list[str], tuple[str, str]]]:
    """Two server processes on one database (for SQLite: one file, two processes)."""
    if request.param == "postgres":
        request.getfixturevalue("pg_admin_url")
        request.applymarker(pytest.mark.postgres)
    url = new_database(request.param)
    keys = create_project(url, "replicas")
    with ServerProcess(url) as a, ServerProcess(url) as b:
        yield [a.url, b.url], keys


@pytest.mark.slow
def test_two_replicas_one_winner_per_round(two_replicas) -> None:  # type: ignore[no-untyped-def]
    urls, keys = two_replicas
    fences = _race(urls, keys)
    assert fences == list(range(1, ROUNDS + 1))


@pytest.mark.slow
def test_two_replicas_mutual_exclusion_under_churn(two_replicas) -> None:  # type: ignore[no-untyped-def]
    """Clients split across replicas grab, hold briefly and release one key for ~2 s.

    Inside the critical section each checks that nobody else is in it, and that fences only
    grow: mutual exclusion and fence monotonicity across processes.
    """
    urls, keys = two_replicas
    key = new_key("churn")
    lock = threading.Lock()
    inside: list[str] = []
    fences: list[int] = []
    violations: list[str] = []
    deadline = time.monotonic() + 2.0

    def client(i: int) -> None:
        with Api(urls[i % 2], *keys) as api:
            while time.monotonic() < deadline:
                token = new_token()
                r = api.acquire(key, token, ttl=30)
                if r.status_code != 200:
                    assert r.status_code == 409, r.text
                    continue
                with lock:
                    if inside:
                        violations.append(f"{token} entered while {inside} inside")
                    if fences and r.json()["fencing_token"] <= fences[-1]:
                        violations.append(f"fence {r.json()['fencing_token']} after {fences[-1]}")
                    inside.append(token)
                    fences.append(r.json()["fencing_token"])
                time.sleep(0.002)
                with lock:
                    inside.remove(token)
                assert api.release(key, token).json()["released"] is True

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not violations, violations[:5]
    assert len(fences) >= 10, "too little traffic to prove anything"
    assert fences == list(range(1, len(fences) + 1))


def _together(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run fn(0..n-1) on n threads released at once; their results in order."""
    barrier = threading.Barrier(n, timeout=20)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_one_request_id_raced_on_different_keys(live_server) -> None:  # type: ignore[no-untyped-def]
    """Twins without a row lock in common: the first record wins, the rest are told so."""
    rid = new_token()
    clients = [Api.of(live_server) for _ in range(CLIENTS)]
    try:
        results = _together(
            CLIENTS, lambda i: clients[i].acquire(new_key(), new_token(), request_id=rid)
        )
    finally:
        for c in clients:
            c.close()
    statuses = sorted(r.status_code for r in results)  # type: ignore[attr-defined]
    assert statuses == [200] + [422] * (CLIENTS - 1), statuses
    for r in results:
        if r.status_code == 422:  # type: ignore[attr-defined]
            assert r.json()["error"]["code"] == "idempotency_key_reused"  # type: ignore[attr-defined]


def test_one_request_id_raced_on_one_key_replays_one_answer(live_server) -> None:  # type: ignore[no-untyped-def]
    """Retries of one call arriving together: one acquisition, every answer identical."""
    rid, key, token = new_token(), new_key(), new_token()
    clients = [Api.of(live_server) for _ in range(CLIENTS)]
    try:
        results = _together(CLIENTS, lambda i: clients[i].acquire(key, token, request_id=rid))
        # Identical but for expires_in_ms, which each answer (replays too) computes afresh.
        bodies = {
            json.dumps({k: v for k, v in r.json().items() if k != "expires_in_ms"})  # type: ignore[attr-defined]
            for r in results
        }
        assert {r.status_code for r in results} == {200}  # type: ignore[attr-defined]
        assert len(bodies) == 1
        assert clients[0].get(key).json()["fencing_token"] == 1
        # The same for a release raced on a free key (no row to lock at all).
        rid, free = new_token(), new_key()
        results = _together(CLIENTS, lambda i: clients[i].release(free, token, request_id=rid))
        assert {r.status_code for r in results} == {200}  # type: ignore[attr-defined]
    finally:
        for c in clients:
            c.close()


@pytest.mark.slow
def test_uvicorn_workers_on_one_sqlite_file(new_database: Callable[[str], str]) -> None:
    url = new_database("sqlite")
    keys = create_project(url, "workers")
    with ServerProcess(url, workers=2) as server:
        fences = _race([server.url], keys)
    assert fences == list(range(1, ROUNDS + 1))
