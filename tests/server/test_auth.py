"""Credentials (DESIGN.md section 1): who may touch a project's locks."""

from __future__ import annotations

import time

import pytest

from tests._server_process import run_cli
from tests.server._api import Api, new_key, new_token


def _code(r) -> str:  # type: ignore[no-untyped-def]
    return r.json()["error"]["code"]  # type: ignore[no-any-return]


def _every_operation(api: Api, key: str) -> list:  # type: ignore[type-arg]
    token = new_token()
    return [
        api.get(key),
        api.acquire(key, token),
        api.renew(key, token),
        api.release(key, token),
        api.force_release(key),
    ]


@pytest.mark.parametrize(
    ("anon", "service", "status"),
    [
        (None, None, 401),  # nothing
        ("vla_wrong", None, 401),  # unknown anon key
        ("vla_wrong", "vls_wrong", 401),
        (None, "SERVICE", 401),  # service key without the anon key
        ("ANON", None, 403),  # anon key alone
        ("ANON", "vls_wrong", 401),  # unknown service key
        ("ANON", "ANON", 401),  # the anon key is not a service key
        ("SERVICE", "SERVICE", 401),  # the service key is not an anon key
    ],
)
def test_rejected_credentials(live_server, anon, service, status) -> None:  # type: ignore[no-untyped-def]
    names = {"ANON": live_server.anon_key, "SERVICE": live_server.service_key}
    key = new_key()
    with Api(live_server.url, names.get(anon, anon), names.get(service, service)) as api:
        for r in _every_operation(api, key):
            assert r.status_code == status, r.text
            assert _code(r) == {401: "unauthorized", 403: "forbidden"}[status]
            assert live_server.anon_key not in r.text and live_server.service_key not in r.text
    with Api.of(live_server) as api:
        assert api.get(key).json()["fencing_token"] is None


@pytest.mark.parametrize(
    "authorization", ["Basic abc", "Bearer", "bearer", "Token x", "SERVICE", "Bearer  x y"]
)
def test_malformed_authorization_is_401(live_server, authorization: str) -> None:  # type: ignore[no-untyped-def]
    value = authorization.replace("SERVICE", live_server.service_key)
    with Api(live_server.url, live_server.anon_key, None) as api:
        r = api.client.get(f"/locks/v1/locks/{new_key()}", headers={"Authorization": value})
        assert r.status_code == 401 and _code(r) == "unauthorized"


def test_bearer_scheme_is_case_insensitive(live_server) -> None:  # type: ignore[no-untyped-def]
    with Api(live_server.url, live_server.anon_key, None) as api:
        r = api.client.get(
            f"/locks/v1/locks/{new_key()}",
            headers={"Authorization": f"bearer {live_server.service_key}"},
        )
        assert r.status_code == 200


def test_service_key_of_another_project_is_403(live_server) -> None:  # type: ignore[no-untyped-def]
    other_anon, other_service = live_server.new_project("other")
    key = new_key()
    for anon, service in (
        (live_server.anon_key, other_service),
        (other_anon, live_server.service_key),
    ):
        with Api(live_server.url, anon, service) as api:
            for r in _every_operation(api, key):
                assert r.status_code == 403 and _code(r) == "forbidden", r.text


def test_projects_are_isolated(live_server) -> None:  # type: ignore[no-untyped-def]
    key = new_key()
    with Api.of(live_server) as a, Api(live_server.url, *live_server.new_project("iso")) as b:
        token = new_token()
        lease = a.acquire(key, token).json()
        # b sees a free lock with no history, and can hold its own lease on it.
        assert b.get(key).json() == {
            "key": key, "held": False, "expires_at": None, "fencing_token": None,
        }  # fmt: skip
        assert b.renew(key, token).json()["error"]["code"] == "not_holder"
        assert b.release(key, token).json()["released"] is False
        assert b.force_release(key).json()["removed"] is False
        assert b.acquire(key, new_token()).status_code == 200
        assert a.get(key).json()["expires_at"] == lease["expires_at"]
        assert a.release(key, token).json()["released"] is True


def test_rotation_revokes_the_old_service_key(live_server) -> None:  # type: ignore[no-untyped-def]
    anon, old_service = live_server.new_project("rot")
    key = new_key()
    with Api(live_server.url, anon, old_service) as old:
        assert old.get(key).status_code == 200  # now cached by the server
        name = None
        listing = run_cli("projects", "list", "--database", live_server.database_url, "--json")
        for project in __import__("json").loads(listing.stdout):
            if project["project"].startswith("rot-"):
                name = project["project"]
        assert name is not None
        done = run_cli(
            "projects", "rotate-service-key", name, "--database", live_server.database_url,
            "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        new_service = __import__("json").loads(done.stdout)["service_key"]
        assert new_service != old_service and new_service.startswith("vls_")
        with Api(live_server.url, anon, new_service) as new:
            assert new.get(key).status_code == 200
        # Revocation bites within the auth cache bound (2 s by default).
        deadline = time.monotonic() + 5
        status = old.get(key).status_code
        while status == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            status = old.get(key).status_code
        assert status == 401


def test_health_and_ready_need_no_credentials(live_server) -> None:  # type: ignore[no-untyped-def]
    with Api(live_server.url, None, None) as api:
        assert api.client.get("/health").status_code == 200
        assert api.client.get("/ready").status_code == 200
