"""The ASGI app in-process, for what a live server cannot be made to do on demand."""

from __future__ import annotations

from pathlib import Path

import httpx

from volcano_server import create_app
from volcano_server._auth import hash_key
from volcano_server.storage import LockState
from volcano_server.storage._sqlite import SQLiteStore


class _BrokenStore(SQLiteStore):
    """A real SQLite store whose reads hit a bug (not a storage outage)."""

    async def get_lock(self, project_id: int, key: str) -> LockState:
        raise RuntimeError("bug: secret-detail /etc/passwd")


async def test_unexpected_exception_is_a_json_500_without_details(tmp_path: Path) -> None:
    store = _BrokenStore(tmp_path / "x.db")
    await store.open()
    try:
        await store.create_project("p", hash_key("anon"), hash_key("service"))
        app = create_app(store, access_log=False)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            rid = "6f1c2d1e-0000-4000-8000-000000000001"
            r = await client.get(
                "/locks/v1/locks/k",
                headers={"apikey": "anon", "Authorization": "Bearer service", "X-Request-Id": rid},
            )
            assert r.status_code == 500
            assert r.json() == {
                "error": {
                    "code": "internal_error",
                    "message": "internal server error",
                    "request_id": rid,
                }
            }
            assert r.headers["x-request-id"] == rid
            assert "secret-detail" not in r.text
            # The service goes on serving.
            r = await client.post(
                "/locks/v1/locks/k/acquire",
                json={"token": "6f1c2d1e-0000-4000-8000-000000000002", "ttl": 30},
                headers={"apikey": "anon", "Authorization": "Bearer service"},
            )
            assert r.status_code == 200
    finally:
        await store.close()


async def test_sqlite_runs_with_wal_and_synchronous_full(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    await store.open()
    try:
        mode = await store._run(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
        sync = await store._run(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
        assert (mode, sync) == ("wal", 2)  # 2 = FULL: commits survive power loss
    finally:
        await store.close()
