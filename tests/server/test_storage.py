"""Stores in-process against real databases: schema migrations and housekeeping sweeps."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from contextlib import closing

import pytest

from volcano_server.storage import (
    LATEST_VERSION,
    Mutation,
    ProjectExists,
    ProjectNotFound,
    SchemaTooNew,
    Store,
    open_store,
    sqlite_path,
)


def _sql(url: str, statement: str) -> None:
    """Run one statement outside the store (test set-up: simulate age, another version)."""
    if url.startswith("sqlite:"):
        with closing(sqlite3.connect(sqlite_path(url))) as conn, conn:
            conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


async def _project(store: Store, name: str = "p") -> int:
    await store.create_project(name, uuid.uuid4().hex, uuid.uuid4().hex)
    return 1  # the first project of a fresh database


def _acquire(project: int, key: str, token: str | None = None, **kw: object) -> Mutation:
    return Mutation(project, "acquire", key, token or str(uuid.uuid4()), 30, **kw)  # type: ignore[arg-type]


@pytest.fixture
def url(backend: str, new_database: Callable[[str], str]) -> str:
    return new_database(backend)


async def test_fresh_database_gets_latest_schema(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        assert await store.schema_version() == LATEST_VERSION
    finally:
        await store.close()
    # Opening again finds nothing to do.
    store = open_store(url)
    await store.open()
    assert await store.schema_version() == LATEST_VERSION
    await store.close()


async def test_older_schema_is_upgraded_and_keeps_data(url: str) -> None:
    store = open_store(url)
    await store.open(schema_version=1)
    assert await store.schema_version() == 1
    project = await _project(store)
    lease = await store.mutate(_acquire(project, "k"))
    await store.close()

    store = open_store(url)
    await store.open()
    try:
        assert await store.schema_version() == LATEST_VERSION
        state = await store.get_lock(project, "k")
        assert state.held and state.fencing_token == lease.body["fencing_token"] == 1
    finally:
        await store.close()


async def test_newer_schema_is_refused_with_a_clear_message(url: str) -> None:
    store = open_store(url)
    await store.open()
    await store.close()
    _sql(url, f"UPDATE schema_version SET version = {LATEST_VERSION + 1}")
    store = open_store(url)
    with pytest.raises(SchemaTooNew) as info:
        await store.open()
    message = str(info.value)
    assert f"version {LATEST_VERSION + 1}" in message and "Upgrade volcano-locks" in message


async def test_sweep_clears_old_leases_but_never_a_fence(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        project = await _project(store)
        token = str(uuid.uuid4())
        await store.mutate(_acquire(project, "old", token))
        await store.mutate(_acquire(project, "fresh"))
        # "old" expired an hour ago: well past the grace period.
        if url.startswith("sqlite:"):
            _sql(url, "UPDATE locks SET expires_at = expires_at - 3600000000 WHERE key = 'old'")
        else:
            _sql(url, "UPDATE locks SET expires_at = expires_at - interval '1 hour'"
                      " WHERE key = 'old'")  # fmt: skip
        result = await store.sweep()
        assert result.leases_cleared == 1
        old = await store.get_lock(project, "old")
        assert not old.held and old.fencing_token == 1
        assert (await store.get_lock(project, "fresh")).held
        # After the sweep the old holder is simply not the holder any more...
        renew = await store.mutate(Mutation(project, "renew", "old", token, 30))
        assert renew.status == 409 and renew.body["error"]["code"] == "not_holder"
        # ...and the fence goes on from where it was.
        again = await store.mutate(_acquire(project, "old"))
        assert again.body["fencing_token"] == 2
        assert (await store.sweep()).leases_cleared == 0
    finally:
        await store.close()


async def test_sweep_keeps_recently_expired_leases_for_precise_answers(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        project = await _project(store)
        token = str(uuid.uuid4())
        await store.mutate(_acquire(project, "k", token))
        if url.startswith("sqlite:"):
            _sql(url, "UPDATE locks SET expires_at = expires_at - 60000000")
        else:
            _sql(url, "UPDATE locks SET expires_at = expires_at - interval '60 seconds'")
        assert (await store.sweep()).leases_cleared == 0
        renew = await store.mutate(Mutation(project, "renew", "k", token, 30))
        assert renew.body["error"]["code"] == "lease_expired"
    finally:
        await store.close()


async def test_sweep_purges_idempotency_records_after_24_hours(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        project = await _project(store)
        old_rid, new_rid = str(uuid.uuid4()), str(uuid.uuid4())
        await store.mutate(_acquire(project, "a", request_id=old_rid))
        await store.mutate(_acquire(project, "b", request_id=new_rid))
        if url.startswith("sqlite:"):
            _sql(url, "UPDATE idempotency SET created_at = created_at - 86460000000"
                      f" WHERE request_id = '{old_rid}'")  # fmt: skip
            _sql(url, "UPDATE idempotency SET created_at = created_at - 82800000000"
                      f" WHERE request_id = '{new_rid}'")  # fmt: skip
        else:
            _sql(url, "UPDATE idempotency SET created_at = created_at - interval '1441 min'"
                      f" WHERE request_id = '{old_rid}'")  # fmt: skip
            _sql(url, "UPDATE idempotency SET created_at = created_at - interval '23 hours'"
                      f" WHERE request_id = '{new_rid}'")  # fmt: skip
        assert (await store.sweep()).idempotency_purged == 1
        # The 23-hour-old record still replays; the purged id is free for a new operation.
        replay = await store.mutate(_acquire(project, "other", request_id=new_rid))
        assert replay.status == 422
        fresh = await store.mutate(_acquire(project, "other", request_id=old_rid))
        assert fresh.status == 200
    finally:
        await store.close()


async def test_projects_and_rotation(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        await store.create_project("alpha", "a1", "s1")
        with pytest.raises(ProjectExists):
            await store.create_project("alpha", "a2", "s2")
        found = await store.lookup_keys("a1", "s1")
        assert found.anon_project is not None and found.anon_project == found.service_project
        await store.rotate_service_key("alpha", "s3")
        assert (await store.lookup_keys("a1", "s1")).service_project is None
        assert (await store.lookup_keys("a1", "s3")).service_project == found.anon_project
        with pytest.raises(ProjectNotFound):
            await store.rotate_service_key("nope", "s4")
        projects = await store.list_projects()
        assert [(p.name, p.service_keys) for p in projects] == [("alpha", 1)]
    finally:
        await store.close()


def test_database_urls() -> None:
    assert sqlite_path("sqlite:///rel/x.db") == "rel/x.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    for bad in ("mysql://x", "sqlite://x.db", "sqlite:///", "locks.db"):
        with pytest.raises(ValueError):
            open_store(bad)


async def test_sqlite_group_commit_isolates_a_failing_operation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from volcano_server.storage._sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "x.db")
    await store.open()
    try:
        project = await _project(store)

        def broken(conn: sqlite3.Connection) -> object:
            conn.execute("INSERT INTO locks (project_id, key, last_fence) VALUES (1, 'bad', 99)")
            raise RuntimeError("bug in one operation")

        # Queued together, so they share one transaction (batches form while the thread works).
        calls = [store.mutate(_acquire(project, "k")) for _ in range(20)]
        calls.insert(10, store._write_batched(broken))  # type: ignore[arg-type]
        results = await asyncio.gather(*calls, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and "bug in one operation" in str(errors[0])
        statuses = sorted(r.status for r in results if not isinstance(r, BaseException))
        assert statuses == [200] + [409] * 19
        # The failed operation's own write was undone; the others' were committed.
        assert (await store.get_lock(project, "bad")).fencing_token is None
        assert (await store.get_lock(project, "k")).fencing_token == 1
    finally:
        await store.close()
