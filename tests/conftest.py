"""Shared fixtures: real databases and real `volcano-locks serve` processes on loopback.

PostgreSQL comes from `VOLCANO_TEST_POSTGRES_URL` (default
`postgresql://postgres@127.0.0.1:5432/postgres`, used only to create and drop databases); each
run gets fresh databases named `volcano_test_<random>` and drops them at the end.  When it
cannot be reached, PostgreSQL tests are skipped with the reason, or fail when `CI=true`.

Fixtures for every test package:

- `pg_url` (session): a fresh PostgreSQL database URL for this run.
- `backend` (session, params `"sqlite"`, `"postgres"`): the backend of `live_server`.
- `live_server` (session, one per backend): a running server with attributes `url`,
  `anon_key`, `service_key`, `database_url`, `backend`, `process` (a `ServerProcess`) and
  `new_project(name) -> (anon_key, service_key)`.
- `sqlite_server` (session): the SQLite `live_server`, for tests that need one backend only.
- `new_database(backend) -> url` (session): a fresh empty database of that backend.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests._server_process import ServerProcess, create_project

DEFAULT_PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BACKENDS = ["sqlite", "postgres"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Anything running on the postgres backend carries the `postgres` mark, so `-m "not
    # postgres"` runs the SQLite half alone.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """A reachable PostgreSQL URL to create databases from; skip or fail (CI) otherwise."""
    url = os.environ.get("VOLCANO_TEST_POSTGRES_URL", DEFAULT_PG_ADMIN_URL)
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        reason = f"PostgreSQL at VOLCANO_TEST_POSTGRES_URL={url!r} is unreachable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI=true: PostgreSQL is required)")
        pytest.skip(reason)
    return url


@pytest.fixture(scope="session")
def _pg_databases(pg_admin_url: str) -> Iterator[Callable[[], str]]:
    import psycopg

    created: list[str] = []

    def make() -> str:
        name = f"volcano_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return _with_database(pg_admin_url, name)

    yield make
    # Bounded retries: fault tests elsewhere on this machine may be restarting PostgreSQL.
    deadline = time.monotonic() + 30
    while created:
        try:
            with psycopg.connect(pg_admin_url, autocommit=True, connect_timeout=3) as conn:
                while created:
                    conn.execute(f'DROP DATABASE IF EXISTS "{created[-1]}" WITH (FORCE)')
                    created.pop()
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="session")
def pg_url(_pg_databases: Callable[[], str]) -> str:
    return _pg_databases()


@pytest.fixture(scope="session")
def new_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], str]:
    """`new_database("sqlite" | "postgres")`: the URL of a fresh, empty database."""

    def make(backend: str) -> str:
        if backend == "sqlite":
            path = tmp_path_factory.mktemp("sqlite") / "locks.db"
            return "sqlite:///" + str(path)  # absolute path: sqlite:////tmp/...
        if backend == "postgres":
            factory: Callable[[], str] = request.getfixturevalue("_pg_databases")
            return factory()
        raise ValueError(backend)

    return make


class LiveServer:
    """A running server plus one project's credentials."""

    def __init__(self, backend: str, process: ServerProcess, anon_key: str, service_key: str):
        self.backend = backend
        self.process = process
        self.anon_key = anon_key
        self.service_key = service_key

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def database_url(self) -> str:
        return self.process.database_url

    @property
    def headers(self) -> dict[str, str]:
        return {"apikey": self.anon_key, "Authorization": f"Bearer {self.service_key}"}

    def new_project(self, name: str | None = None) -> tuple[str, str]:
        """Create a project (a unique name is made from `name`); its (anon_key, service_key)."""
        unique = f"{name or 'project'}-{uuid.uuid4().hex[:8]}"
        return create_project(self.database_url, unique)


@pytest.fixture(scope="session")
def _live_servers(
    request: pytest.FixtureRequest, new_database: Callable[[str], str]
) -> Iterator[Callable[[str], LiveServer]]:
    started: dict[str, LiveServer] = {}

    def get(backend: str) -> LiveServer:
        if backend not in started:
            url = new_database(backend)
            anon, service = create_project(url, f"live-{backend}")
            process = ServerProcess(url).start()
            started[backend] = LiveServer(backend, process, anon, service)
        return started[backend]

    yield get
    for server in started.values():
        server.process.close()


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "postgres":
        request.getfixturevalue("pg_admin_url")  # skip (or fail on CI) without PostgreSQL
    return name


@pytest.fixture(scope="session")
def live_server(backend: str, _live_servers: Callable[[str], LiveServer]) -> LiveServer:
    return _live_servers(backend)


@pytest.fixture(scope="session")
def sqlite_server(_live_servers: Callable[[str], LiveServer]) -> LiveServer:
    return _live_servers("sqlite")


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
