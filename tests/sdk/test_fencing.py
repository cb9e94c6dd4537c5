"""Fence helpers on real PostgreSQL and SQLite: claim-then-verify refuses stale holders.

The race of the docs is reproduced twice: the naive check-on-write store loses an update; the
claim-first store refuses the stale holder instead.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from volcano_sdk import Fence, StaleFenceError

Connect = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgres"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Connect:
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        return lambda: sqlite3.connect(path, timeout=10)
    import psycopg

    url = request.getfixturevalue("pg_url")
    return lambda: psycopg.connect(url)


@contextmanager
def transaction(conn: Any) -> Iterator[Any]:
    """One transaction on either driver; yields a cursor."""
    if isinstance(conn, sqlite3.Connection):
        with conn:
            yield conn.cursor()
    else:
        with conn.transaction():
            yield conn.cursor()


def p(conn: Any) -> str:
    return "?" if isinstance(conn, sqlite3.Connection) else "%s"


@pytest.fixture
def resource(connect: Connect, request: pytest.FixtureRequest) -> str:
    name = f"report-{request.node.name[-20:]}-{time.monotonic_ns()}"
    conn = connect()
    with transaction(conn) as cur:
        Fence(1, resource=name).create_table(cur)
        cur.execute(
            "CREATE TABLE IF NOT EXISTS counters "
            "(id TEXT PRIMARY KEY, value INTEGER NOT NULL, fence BIGINT NOT NULL)"
        )
        cur.execute(f"INSERT INTO counters VALUES ({p(conn)}, 0, 0)", (name,))
    conn.close()
    return name


def read(conn: Any, resource: str) -> int:
    with transaction(conn) as cur:
        cur.execute(f"SELECT value FROM counters WHERE id = {p(conn)}", (resource,))
        value: int = cur.fetchone()[0]
        return value


def naive_write(conn: Any, resource: str, value: int, fence: int) -> bool:
    """The check-on-write-only store: accept any fence not lower than the stored one."""
    with transaction(conn) as cur:
        q = p(conn)
        cur.execute(
            f"UPDATE counters SET value = {q}, fence = {q} WHERE id = {q} AND fence <= {q}",
            (value, fence, resource, fence),
        )
        return bool(cur.rowcount == 1)


def test_naive_check_on_write_loses_an_update(connect: Connect, resource: str) -> None:
    a, b = connect(), connect()
    a_read = read(a, resource)  # A holds fence 5 and reads
    b_read = read(b, resource)  # A's lease expires; B holds fence 6 and reads
    assert naive_write(a, resource, a_read + 1, fence=5)  # A's stale write is accepted...
    assert naive_write(b, resource, b_read + 1, fence=6)
    assert read(a, resource) == 1  # ...and two acknowledged increments left one: a lost update


def test_claim_then_verify_refuses_the_stale_holder(connect: Connect, resource: str) -> None:
    a, b = connect(), connect()
    fence_a, fence_b = Fence(5, resource=resource), Fence(6, resource=resource)
    with transaction(a) as cur:
        fence_a.claim(cur)
    a_read = read(a, resource)
    with transaction(b) as cur:
        fence_b.claim(cur)  # B takes over before reading
    b_read = read(b, resource)
    with pytest.raises(StaleFenceError) as info, transaction(a) as cur:
        fence_a.verify(cur)  # A's write never happens
        cur.execute(f"UPDATE counters SET value = {p(a)} WHERE id = {p(a)}", (a_read + 1, resource))
    assert info.value.fencing_token == 5 and info.value.resource == resource
    with transaction(b) as cur:
        fence_b.verify(cur)
        cur.execute(f"UPDATE counters SET value = {p(b)} WHERE id = {p(b)}", (b_read + 1, resource))
    assert read(a, resource) == 1  # only the current holder's increment, nothing acknowledged lost
    with pytest.raises(StaleFenceError), transaction(a) as cur:
        fence_a.claim(cur)  # a stale holder cannot claim back either


def test_verify_holds_off_a_newer_claim_until_the_write_commits(
    connect: Connect, resource: str
) -> None:
    a = connect()
    fence_a, fence_b = Fence(5, resource=resource), Fence(6, resource=resource)
    with transaction(a) as cur:
        fence_a.claim(cur)
    claimed_at: list[float] = []

    def newer_claim() -> None:
        b = connect()  # sqlite3 connections stay in the thread that made them
        with transaction(b) as cur:
            fence_b.claim(cur)
        claimed_at.append(time.monotonic())

    context: AbstractContextManager[Any] = transaction(a)
    cur = context.__enter__()
    fence_a.verify(cur)  # A is writing
    rival = threading.Thread(target=newer_claim)
    rival.start()
    time.sleep(0.3)
    assert claimed_at == []  # the claim waits for A's transaction
    cur.execute(f"UPDATE counters SET value = 41 WHERE id = {p(a)}", (resource,))
    committed_at = time.monotonic()
    context.__exit__(None, None, None)
    rival.join(10)
    assert claimed_at and claimed_at[0] >= committed_at
    with pytest.raises(StaleFenceError), transaction(a) as cur:
        fence_a.verify(cur)


@pytest.mark.parametrize("token", [0, -1, True, 1.5])
def test_fence_token_must_be_positive_int(token: object) -> None:
    with pytest.raises(ValueError):
        Fence(token, resource="r")  # type: ignore[arg-type]


def test_table_name_must_be_an_identifier() -> None:
    with pytest.raises(ValueError):
        Fence(1, resource="r", table="fences; DROP TABLE x")
