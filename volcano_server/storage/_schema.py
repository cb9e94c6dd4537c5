"""Schema migrations, per backend. Version N is reached by applying steps 1..N in order.

A database records its version in `schema_version`. At start the server upgrades an older one and
refuses a newer one (a newer server has been there; running old code on it could break rules the
new schema enforces).  Add a migration by appending a version; never edit a released one.
"""

from __future__ import annotations

__all__ = ["LATEST_VERSION", "POSTGRES_MIGRATIONS", "SQLITE_MIGRATIONS", "too_new_message"]

POSTGRES_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE projects (
            id bigserial PRIMARY KEY,
            name text NOT NULL UNIQUE,
            anon_key_hash text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL DEFAULT now()
        )""",
        """CREATE TABLE service_keys (
            key_hash text PRIMARY KEY,
            project_id bigint NOT NULL REFERENCES projects(id),
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        )""",
        # One row per key ever acquired, never deleted: last_fence must outlive every lease.
        """CREATE TABLE locks (
            project_id bigint NOT NULL REFERENCES projects(id),
            key text NOT NULL,
            last_fence bigint NOT NULL,
            token text,
            token_text text,
            expires_at timestamptz,
            PRIMARY KEY (project_id, key)
        )""",
        """CREATE TABLE idempotency (
            project_id bigint NOT NULL,
            request_id text NOT NULL,
            fingerprint text NOT NULL,
            status integer NOT NULL,
            body text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project_id, request_id)
        )""",
    ],
    2: [
        # For the periodic sweeps, which would otherwise scan whole tables.
        "CREATE INDEX idempotency_created_at ON idempotency (created_at)",
        "CREATE INDEX locks_expires_at ON locks (expires_at) WHERE token IS NOT NULL",
        "CREATE INDEX service_keys_project ON service_keys (project_id)",
    ],
}

# SQLite keeps times as integer microseconds since the Unix epoch (UTC).
SQLITE_MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE projects (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            anon_key_hash TEXT NOT NULL UNIQUE,
            created_at INTEGER NOT NULL
        )""",
        """CREATE TABLE service_keys (
            key_hash TEXT PRIMARY KEY,
            project_id INTEGER NOT NULL REFERENCES projects(id),
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        )""",
        """CREATE TABLE locks (
            project_id INTEGER NOT NULL REFERENCES projects(id),
            key TEXT NOT NULL,
            last_fence INTEGER NOT NULL,
            token TEXT,
            token_text TEXT,
            expires_at INTEGER,
            PRIMARY KEY (project_id, key)
        ) WITHOUT ROWID""",
        """CREATE TABLE idempotency (
            project_id INTEGER NOT NULL,
            request_id TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            status INTEGER NOT NULL,
            body TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (project_id, request_id)
        ) WITHOUT ROWID""",
    ],
    2: [
        "CREATE INDEX idempotency_created_at ON idempotency (created_at)",
        "CREATE INDEX locks_expires_at ON locks (expires_at) WHERE token IS NOT NULL",
        "CREATE INDEX service_keys_project ON service_keys (project_id)",
    ],
}

LATEST_VERSION = max(POSTGRES_MIGRATIONS)
assert set(POSTGRES_MIGRATIONS) == set(SQLITE_MIGRATIONS) == set(range(1, LATEST_VERSION + 1))


def too_new_message(found: int) -> str:
    return (
        f"the database schema is at version {found}, newer than this server supports "
        f"(version {LATEST_VERSION}); it was migrated by a newer volcano-locks. "
        "Upgrade volcano-locks, or point it at another database."
    )
