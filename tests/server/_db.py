"""Direct database access for tests: inspect rows and move a lease's expiry into the past.

Backdating `expires_at` stands in for waiting out a TTL (5 s at least); one test per backend
still waits for a real expiry.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

__all__ = ["backdate", "lock_row"]


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :]


def backdate(database_url: str, key: str, seconds: float = 3600) -> None:
    """Move the expiry of every lease on `key` (all projects) `seconds` into the past."""
    if database_url.startswith("sqlite:"):
        with closing(sqlite3.connect(_sqlite_path(database_url), timeout=10)) as conn, conn:
            conn.execute(
                "UPDATE locks SET expires_at = expires_at - ? WHERE key = ? AND token IS NOT NULL",
                (int(seconds * 1_000_000), key),
            )
        return
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE locks SET expires_at = expires_at - make_interval(secs => %s)"
            " WHERE key = %s AND token IS NOT NULL",
            (seconds, key),
        )


def lock_row(database_url: str, key: str) -> dict[str, Any] | None:
    if database_url.startswith("sqlite:"):
        with closing(sqlite3.connect(_sqlite_path(database_url), timeout=10)) as conn, conn:
            r = conn.execute(
                "SELECT last_fence, token, token_text, expires_at FROM locks WHERE key = ?",
                (key,),
            ).fetchone()
    else:
        import psycopg

        with psycopg.connect(database_url, autocommit=True) as conn:
            r = conn.execute(
                "SELECT last_fence, token, token_text, expires_at FROM locks WHERE key = %s",
                (key,),
            ).fetchone()
    if r is None:
        return None
    return {"last_fence": r[0], "token": r[1], "token_text": r[2], "expires_at": r[3]}
