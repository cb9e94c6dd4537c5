"""The contract and the generation pipeline: openapi.yaml -> generated/."""

from __future__ import annotations

import filecmp
import importlib
import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from openapi_spec_validator import validate

from generated.api.locks import acquire_lock, get_lock
from generated.client import AuthenticatedClient
from generated.models import AcquireRequest

ROOT = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((ROOT / "openapi.yaml").read_text())


def test_spec_validates() -> None:
    validate(SPEC)


def test_every_lock_operation_needs_both_credentials_and_takes_a_request_id() -> None:
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            if not path.startswith("/locks/v1/"):
                assert op["security"] == [], f"{path} should be open"
                continue
            assert op["security"] == [{"apikey": [], "serviceKey": []}], path
            params = [p["$ref"] for p in item.get("parameters", [])]
            assert "#/components/parameters/RequestId" in params, path
            for status, response in op["responses"].items():
                if not status.startswith("2"):
                    ref = response["$ref"].rsplit("/", 1)[-1]
                    schema = SPEC["components"]["responses"][ref]["content"]["application/json"]
                    assert schema["schema"]["$ref"] == "#/components/schemas/Error", (path, status)


def test_uuid_strings_are_patterns_not_format_uuid() -> None:
    # format: uuid would make the generated client lowercase the caller's spelling.
    assert "format: uuid" not in (ROOT / "openapi.yaml").read_text()
    pattern = SPEC["components"]["schemas"]["UuidString"]["pattern"]
    assert re.fullmatch(pattern, "6B29FC40-CA47-1067-B31D-00DD010662DA")


@pytest.mark.parametrize("key", ["a", "daily-report", "a/b:c.d-e_f", "...", ".a", "..a", "x" * 255])
def test_key_pattern_accepts(key: str) -> None:
    assert re.fullmatch(SPEC["components"]["schemas"]["LockKey"]["pattern"], key)


@pytest.mark.parametrize("key", ["", ".", "..", "x" * 256, "a b", "a%2Fb", "ключ", "a?b"])
def test_key_pattern_rejects(key: str) -> None:
    assert not re.fullmatch(SPEC["components"]["schemas"]["LockKey"]["pattern"], key)


def _operation_ids() -> list[str]:
    return [
        op["operationId"]
        for item in SPEC["paths"].values()
        for method, op in item.items()
        if method != "parameters"
    ]


@pytest.mark.parametrize("operation_id", _operation_ids())
def test_every_operation_has_a_generated_module(operation_id: str) -> None:
    module = importlib.import_module(f"generated.api.locks.{operation_id}")
    for name in ("sync", "sync_detailed", "asyncio", "asyncio_detailed"):
        assert callable(getattr(module, name)), f"{operation_id}.{name}"
    # volcano_sdk._adapter relies on these two to read the status before parsing.
    assert callable(module._get_kwargs) and callable(module._build_response)


def test_key_reaches_the_server_path_encoded_and_intact() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)  # an undeclared status: parsed as None, nothing raised

    client = AuthenticatedClient(
        base_url="http://locks.test",
        token="service",
        httpx_args={"transport": httpx.MockTransport(record)},
    )
    key = "jobs/daily-report:eu.1"
    get_lock.sync_detailed(key, client=client)
    acquire_lock.sync_detailed(
        key,
        client=client,
        body=AcquireRequest(token="A" * 8 + "-1111-2222-3333-" + "4" * 12, ttl=30),
    )
    assert [r.url.raw_path for r in seen] == [
        b"/locks/v1/locks/jobs%2Fdaily-report%3Aeu.1",
        b"/locks/v1/locks/jobs%2Fdaily-report%3Aeu.1/acquire",
    ]


@pytest.mark.slow
def test_generation_is_deterministic(tmp_path: Path) -> None:
    # Two runs under different hash seeds must match each other and the committed generated/.
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}"
        subprocess.run(
            [str(ROOT / "scripts" / "generate"), "--output", str(out)],
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
        )
        outputs.append(out)
    for out in outputs:
        comparison = filecmp.dircmp(out, ROOT / "generated")
        assert _tree_equal(comparison), f"{out} differs from generated/"


def _tree_equal(comparison: filecmp.dircmp[str]) -> bool:
    if comparison.left_only or comparison.right_only or comparison.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(
        comparison.left, comparison.right, comparison.common_files, shallow=False
    )
    if mismatch or errors:
        return False
    return all(_tree_equal(sub) for sub in comparison.subdirs.values())
