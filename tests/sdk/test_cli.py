"""`volcano-locks locks ...`: the admin CLI on the SDK, against the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import LiveServer
from volcano_sdk import VolcanoClient


def run(server: LiveServer, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "VOLCANO_ANON_KEY": server.anon_key,
        "VOLCANO_SERVICE_KEY": server.service_key,
        "VOLCANO_API_URL": server.url,
    }
    return subprocess.run(
        [sys.executable, "-m", "volcano_sdk", *args],
        env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_get_prints_state_and_json(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    done = run(live_server, "locks", "get", key)
    assert done.returncode == 0 and "free, never acquired" in done.stdout
    lease = client.locks.acquire(key, ttl=30)
    done = run(live_server, "locks", "get", key)
    assert f"held, fencing token {lease.fencing_token}" in done.stdout
    data = json.loads(run(live_server, "locks", "get", key, "--json").stdout)
    assert data["held"] is True and data["fencing_token"] == lease.fencing_token
    assert lease.token not in done.stdout + done.stderr


def test_list_pages_through_every_held_lock(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    for i in range(3):
        client.locks.acquire(f"{key}/{i}", ttl=30)
    page = client.locks.list(prefix=key + "/", limit=2)
    assert [s.key for s in page.locks] == [f"{key}/0", f"{key}/1"] and page.next_after
    rest = client.locks.list(prefix=key + "/", after=page.next_after, limit=2)
    assert [s.key for s in rest.locks] == [f"{key}/2"] and rest.next_after is None
    data = json.loads(run(live_server, "locks", "list", "--prefix", key + "/", "--json").stdout)
    assert [d["key"] for d in data] == [f"{key}/{i}" for i in range(3)]
    human = run(live_server, "locks", "list", "--prefix", key + "/").stdout
    assert human.count("held, fencing token") == 3
    assert "no held locks" in run(live_server, "locks", "list", "--prefix", key + "/x").stdout


def test_force_release_asks_unless_yes(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    client.locks.acquire(key, ttl=30)
    refused = run(live_server, "locks", "force-release", key)  # stdin is not a terminal
    assert refused.returncode == 3 and "--yes" in refused.stderr
    assert client.locks.get(key).held
    done = run(live_server, "locks", "force-release", key, "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"key": key, "removed": True}
    assert not client.locks.get(key).held


def test_force_release_confirmation_prompt(
    live_server: LiveServer, client: VolcanoClient, key: str
) -> None:
    import io

    from volcano_sdk._cli import locks_main

    client.locks.acquire(key, ttl=30)
    env = {
        "VOLCANO_ANON_KEY": live_server.anon_key,
        "VOLCANO_SERVICE_KEY": live_server.service_key,
        "VOLCANO_API_URL": live_server.url,
    }
    prompts: list[str] = []
    out = io.StringIO()
    code = locks_main(
        ["force-release", key],
        environ=env,
        out=out,
        interactive=True,
        ask=lambda p: prompts.append(p) or "n",
    )  # type: ignore[func-returns-value]
    assert code == 3 and "not released" in out.getvalue() and client.locks.get(key).held
    assert "held, fencing token" in prompts[0]
    code = locks_main(
        ["force-release", key], environ=env, out=out, interactive=True, ask=lambda p: "yes"
    )
    assert code == 0 and not client.locks.get(key).held


@pytest.mark.parametrize(
    ("args", "env_drop", "code", "message"),
    [
        (["locks", "get", "k"], "VOLCANO_SERVICE_KEY", 2, "VOLCANO_SERVICE_KEY"),
        (["locks", "get", ".."], None, 2, "reserved"),
    ],
)
def test_usage_errors_are_clear(
    live_server: LiveServer, args: list[str], env_drop: str | None, code: int, message: str
) -> None:
    env = {
        **os.environ,
        "VOLCANO_ANON_KEY": live_server.anon_key,
        "VOLCANO_SERVICE_KEY": live_server.service_key,
        "VOLCANO_API_URL": live_server.url,
    }
    if env_drop:
        env.pop(env_drop)
    done = subprocess.run(
        [sys.executable, "-m", "volcano_sdk", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == code and message in done.stderr


def test_service_errors_exit_1_without_secrets(live_server: LiveServer) -> None:
    env = {
        **os.environ,
        "VOLCANO_ANON_KEY": live_server.anon_key,
        "VOLCANO_SERVICE_KEY": "vls_wrong-secret",
        "VOLCANO_API_URL": live_server.url,
    }
    done = subprocess.run(
        [sys.executable, "-m", "volcano_sdk", "locks", "get", "k"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "401" in done.stderr and "wrong-secret" not in done.stderr


def test_server_commands_still_work_through_the_same_command(tmp_path: object) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "volcano_sdk",
            "projects",
            "list",
            "--database",
            f"sqlite:///{tmp_path}/x.db",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
