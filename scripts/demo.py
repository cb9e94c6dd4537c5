"""The local demo: an embedded server on SQLite, a project, every documented example, a clean stop.

Run it with `scripts/demo` (which sets up .venv first). Nothing outside a temporary folder is
touched, and no key is printed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [
    "acquire_release.py",
    "renew_inspect.py",
    "with_lock.py",
    "recover_acquisition.py",
    "force_release.py",
    "fenced_write_sqlite.py",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "volcano_server", *args]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="volcano-demo-") as folder:
        database = f"sqlite:///{folder}/locks.db"
        created = subprocess.run(
            _cli("projects", "create", "demo", "--database", database, "--json"),
            capture_output=True,
            text=True,
            check=True,
        )
        keys = json.loads(created.stdout)
        print(f"created project {keys['project']!r} in {folder}/locks.db")
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            _cli("serve", "--database", database, "--host", "127.0.0.1", "--port", str(port)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if httpx.get(url + "/ready", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    print("the server did not start", file=sys.stderr)
                    return 1
                time.sleep(0.05)
            print(f"serving on {url}\n")
            env = {
                **os.environ,
                "VOLCANO_ANON_KEY": keys["anon_key"],
                "VOLCANO_SERVICE_KEY": keys["service_key"],
                "VOLCANO_API_URL": url,
                "FENCED_SQLITE_PATH": f"{folder}/protected.db",
            }
            for name in EXAMPLES:
                print(f"$ python examples/{name}")
                done = subprocess.run(
                    [sys.executable, str(ROOT / "examples" / name)],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                print(done.stdout + done.stderr, end="")
                if done.returncode != 0:
                    print(f"example {name} failed with {done.returncode}", file=sys.stderr)
                    return 1
                print()
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
        print(f"server stopped (exit status {server.returncode}); the demo is done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
