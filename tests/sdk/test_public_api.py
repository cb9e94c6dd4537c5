"""The public surface: one import, twins with the same API, secrets kept out of reprs."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import volcano_sdk
from volcano_sdk import (
    AsyncLockGuard,
    AsyncLocks,
    AsyncVolcanoClient,
    LockGuard,
    Locks,
    VolcanoClient,
    VolcanoError,
)

TWINS = [(VolcanoClient, AsyncVolcanoClient), (Locks, AsyncLocks), (LockGuard, AsyncLockGuard)]
SYNC_TO_ASYNC = {"__enter__": "__aenter__", "__exit__": "__aexit__"}


def _public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in SYNC_TO_ASYNC or name in SYNC_TO_ASYNC.values()
    }


@pytest.mark.parametrize(("sync", "async_"), TWINS)
def test_twins_expose_the_same_api(sync: type, async_: type) -> None:
    sync_members, async_members = _public(sync), _public(async_)
    assert {SYNC_TO_ASYNC.get(n, n) for n in sync_members} == set(async_members)
    for name, member in sync_members.items():
        twin = async_members[SYNC_TO_ASYNC.get(name, name)]
        if isinstance(member, property):
            assert isinstance(twin, property), name
            continue
        assert callable(member), name
        sync_sig, async_sig = inspect.signature(member), inspect.signature(twin)  # type: ignore[arg-type]
        assert list(sync_sig.parameters) == list(async_sig.parameters), name
        assert [p.default for p in sync_sig.parameters.values()] == [
            p.default for p in async_sig.parameters.values()
        ], name


def test_every_public_name_is_importable_from_the_package() -> None:
    for name in volcano_sdk.__all__:
        assert getattr(volcano_sdk, name) is not None
        obj = getattr(volcano_sdk, name)
        if isinstance(obj, type):
            assert obj.__module__ == "volcano_sdk", name


def test_every_error_is_a_volcano_error() -> None:
    errors = [getattr(volcano_sdk, n) for n in volcano_sdk.__all__ if n.endswith("Error")]
    assert len(errors) >= 15
    assert all(issubclass(e, VolcanoError) for e in errors)


def test_client_repr_hides_the_keys() -> None:
    client = VolcanoClient("anon-secret-1", "service-secret-2", "http://127.0.0.1:9")
    try:
        assert "secret" not in repr(client) and "secret" not in str(vars(client.locks))
    finally:
        client.close()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"anon_key": "", "service_key": "s"}, ValueError),
        ({"anon_key": "a", "service_key": None}, TypeError),
        ({"anon_key": "a", "service_key": "s", "api_url": "api.volcano.dev"}, ValueError),
        ({"anon_key": "a", "service_key": "s", "timeout": 0}, ValueError),
    ],
)
def test_client_arguments_are_checked(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        VolcanoClient(**kwargs)  # type: ignore[arg-type]


def test_import_needs_neither_the_server_extra_nor_a_network() -> None:
    # Block the server's dependencies: importing the SDK must not touch them.
    code = (
        "import sys\n"
        "for m in ('starlette', 'uvicorn', 'asyncpg', 'psycopg', 'volcano_server'):\n"
        "    sys.modules[m] = None\n"
        "import socket\n"
        "def no_network(*a, **k): raise OSError('network used at import')\n"
        "socket.socket.connect = no_network\n"
        "import volcano_sdk\n"
        "print(len(volcano_sdk.__all__))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(volcano_sdk.__all__)
