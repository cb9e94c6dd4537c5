"""Every snippet of the user's documentation is an example file, and every example runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "seed" / "distributed-locks.txt"
START, END = "# --- seed snippet ---\n", "# --- end of seed snippet ---\n"
ALL_EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
EXAMPLES = [p for p in ALL_EXAMPLES if START in p.read_text()]  # the user documentation's
CODE_STARTS = (
    "import ",
    "from ",
    "client",
    "lease",
    "state",
    "with ",
    "try:",
    "finally:",
    "owner_token",
    "request_id",
    "print(",
    "    ",
    ")",
)


def _seed_text() -> str:
    if not SEED.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{SEED} is missing: CI must have shared/ beside the clone")
        pytest.skip(f"{SEED} is not beside this checkout")
    return SEED.read_text()


def _snippet(path: Path) -> str:
    text = path.read_text()
    assert START in text, f"{path.name} marks no seed snippet"
    snippet = text.split(START, 1)[1]
    return snippet.split(END, 1)[0] if END in snippet else snippet


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_snippet_is_verbatim_from_the_documentation(path: Path) -> None:
    assert _snippet(path).strip() in _seed_text()


def test_every_code_line_of_the_documentation_is_in_an_example() -> None:
    covered = "".join(_snippet(p) for p in EXAMPLES)
    code_lines = [
        line
        for line in _seed_text().splitlines()
        if line.startswith(CODE_STARTS) and not line.endswith(".")
    ]
    assert len(code_lines) > 25
    assert [line for line in code_lines if line not in covered] == []
    # The one snippet that lives inline in a sentence.
    assert 'client.locks.force_release("daily-report")' in covered


ORDER = [
    "acquire_release.py",
    "renew_inspect.py",
    "with_lock.py",
    "recover_acquisition.py",
    "force_release.py",
    "fenced_write_sqlite.py",
    "fenced_write_postgres.py",
]
EXPECTED = {
    "acquire_release.py": "Lease acquired ",
    "renew_inspect.py": "False None ",
    "with_lock.py": "Current fence ",
    "recover_acquisition.py": "Recovered the same lease: True",
    "force_release.py": "Held after force release: False",
    "fenced_write_sqlite.py": "Stale write refused for fence",
    "fenced_write_postgres.py": "Stale write refused for fence",
}


def test_examples_run_in_order_against_the_live_server(
    live_server: LiveServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert sorted(ORDER) == [p.name for p in ALL_EXAMPLES]
    order = ORDER
    try:
        pg_url = request.getfixturevalue("pg_url")
    except pytest.skip.Exception:  # no PostgreSQL here (CI fails instead): run the rest
        pg_url, order = "", [name for name in ORDER if "postgres" not in name]
    anon, service = live_server.new_project("examples")
    env = {
        **os.environ,
        "VOLCANO_ANON_KEY": anon,
        "VOLCANO_SERVICE_KEY": service,
        "VOLCANO_API_URL": live_server.url,
        "FENCED_POSTGRES_URL": pg_url,
        "FENCED_SQLITE_PATH": str(tmp_path / "fenced.db"),
    }
    for name in order:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{name}: {done.stderr}"
        assert EXPECTED[name] in done.stdout, f"{name}: {done.stdout}"
        assert service not in done.stdout + done.stderr
