"""The `volcano-locks` command line, run as real subprocesses."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from tests._server_process import ServerProcess, create_project, run_cli
from tests.server._api import Api, new_key, new_token
from volcano_server.storage import LATEST_VERSION


def test_projects_create_json_prints_keys_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    done = run_cli("projects", "create", "alpha", "--database", url, "--json")
    assert done.returncode == 0, done.stderr
    keys = json.loads(done.stdout)
    assert set(keys) == {"project", "anon_key", "service_key"}
    assert keys["project"] == "alpha"
    assert keys["anon_key"].startswith("vla_") and keys["service_key"].startswith("vls_")
    assert len(keys["anon_key"]) >= 40 and len(keys["service_key"]) >= 40
    # Only hashes are stored.
    raw = Path(f"{tmp_path}/db.sqlite").read_bytes()
    assert keys["anon_key"].encode() not in raw and keys["service_key"].encode() not in raw
    # Listing shows the project, never a key.
    listing = run_cli("projects", "list", "--database", url, "--json")
    assert json.loads(listing.stdout)[0]["project"] == "alpha"
    assert keys["service_key"] not in listing.stdout and keys["anon_key"] not in listing.stdout
    human = run_cli("projects", "list", "--database", url)
    assert "alpha" in human.stdout and "1 active service key" in human.stdout


def test_projects_create_human_readable(tmp_path: Path) -> None:
    done = run_cli("projects", "create", "beta", "--database", f"sqlite:///{tmp_path}/x.db")
    assert done.returncode == 0
    assert "Created project beta" in done.stdout
    assert "vla_" in done.stdout and "vls_" in done.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stdout)


def test_projects_create_refuses_duplicates_and_bad_names(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    assert run_cli("projects", "create", "dup", "--database", url).returncode == 0
    again = run_cli("projects", "create", "dup", "--database", url)
    assert again.returncode == 1 and "exists already" in again.stderr
    bad = run_cli("projects", "create", "no spaces", "--database", url)
    assert bad.returncode == 2
    missing = run_cli("projects", "rotate-service-key", "ghost", "--database", url)
    assert missing.returncode == 1 and "no project named" in missing.stderr


def test_relative_sqlite_url_and_environment_variable(tmp_path: Path) -> None:
    done = run_cli(
        "projects", "create", "env", "--json",
        env={"VOLCANO_DATABASE_URL": f"sqlite:///{tmp_path}/from-env.db"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-env.db").exists()


def test_default_database_is_under_xdg_data_home(tmp_path: Path) -> None:
    done = run_cli("projects", "create", "dflt", env={"XDG_DATA_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "volcano-locks" / "locks.db").exists()
    help_text = run_cli("serve", "--help", env={"XDG_DATA_HOME": str(tmp_path)}).stdout
    assert "locks.db" in help_text


def test_unsupported_database_url_is_refused(tmp_path: Path) -> None:
    done = run_cli("projects", "list", "--database", "mysql://x/y")
    assert done.returncode == 2 and "unsupported database URL" in done.stderr


def test_serve_refuses_a_newer_schema(backend: str, new_database: Callable[[str], str]) -> None:
    url = new_database(backend)
    assert run_cli("migrate", "--database", url).returncode == 0
    if backend == "sqlite":
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute("UPDATE schema_version SET version = ?", (LATEST_VERSION + 7,))
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (LATEST_VERSION + 7,))
    done = run_cli("serve", "--database", url, "--port", "1")
    assert done.returncode == 3
    assert f"schema is at version {LATEST_VERSION + 7}" in done.stderr
    assert "newer than this server supports" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_clean_shutdown_on_signal(tmp_path: Path, sig: int) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    server = ServerProcess(url).start()
    try:
        assert server.process is not None
        server.process.send_signal(sig)
        assert server.process.wait(15) == 0
        log = server.log_text()
        assert "Shutting down" in log and "Finished server process" in log
        assert "Traceback" not in log
    finally:
        server.close()


def test_access_log_never_contains_keys_or_tokens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    anon, service = create_project(url, "logs")
    secret_key = "secret-lock-name/" + new_key()
    with ServerProcess(url) as server, Api(server.url, anon, service) as api:
        token, rid = new_token(), new_token()
        api.acquire(secret_key, token, request_id=rid)
        api.renew(secret_key, token)
        api.get(secret_key)
        api.acquire(secret_key, new_token())  # 409
        api.acquire(secret_key, token, ttl=True)  # 422
        api.release(secret_key, token)
        api.client.post("/locks/v1/locks/x/acquire", content=b"{bad json")
        with Api(server.url, anon, "vls_wrong") as bad:
            bad.get(secret_key)
        log = server.log_text()
    assert rid in log  # the log is really there and names requests
    assert '"POST /locks/v1/locks/{key}/acquire" 200' in log
    for secret in (anon, service, token, "vls_wrong", secret_key, "secret-lock-name"):
        assert secret not in log


def test_serve_runs_the_periodic_sweep(backend: str, new_database: Callable[[str], str]) -> None:
    from tests.server._db import backdate, lock_row

    url = new_database(backend)
    keys = create_project(url, "sweep")
    key = new_key()
    with ServerProcess(url, extra_args=("--sweep-interval", "0.2")) as server:
        with Api(server.url, *keys) as api:
            fence = api.acquire(key, new_token()).json()["fencing_token"]
        backdate(url, key, seconds=3600)  # expired an hour ago: past the 5-minute grace
        deadline = time.monotonic() + 10
        while (row := lock_row(url, key)) is not None and row["token"] is not None:
            assert time.monotonic() < deadline, "the sweep did not run"
            time.sleep(0.1)
    assert row == {"last_fence": fence, "token": None, "token_text": None, "expires_at": None}


def test_unusable_sqlite_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_bytes(b"this is not a database" * 100)
    done = run_cli("serve", "--database", f"sqlite:///{tmp_path}/junk.db", "--port", "1")
    assert done.returncode == 1
    assert "cannot open SQLite database" in done.stderr and "Traceback" not in done.stderr


def test_unreachable_postgres_is_a_clear_error() -> None:
    # Port 1 on loopback: nothing listens there, so the connection is refused at once.
    done = run_cli("projects", "list", "--database", "postgresql://nobody@127.0.0.1:1/x")
    assert done.returncode == 1
    assert "cannot connect to PostgreSQL" in done.stderr and "Traceback" not in done.stderr
