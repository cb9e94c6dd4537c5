"""Sampling profiles with py-spy: the client (this process) or a server, under load.

Only on-CPU samples are kept (py-spy's default, without ``--idle``), so the figures say where
CPU time goes, not where threads wait.  Frames are aggregated without line numbers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RATE = 250  # samples per second

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^:()]+)(?::\d+)?\)$")


@dataclass
class Profile:
    title: str
    samples: int = 0
    self_top: list[tuple[str, float]] = field(default_factory=list)
    inclusive_top: list[tuple[str, float]] = field(default_factory=list)
    packages: list[tuple[str, float]] = field(default_factory=list)
    skipped: str | None = None


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"  # installed into the venv the bench runs in
    return str(here) if here.exists() else shutil.which("py-spy")


def _label(frame: str) -> tuple[str, str]:
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip(), frame.strip()
    file = m.group("file")
    return f"{m.group('func')} ({file})", _package(file)


def _package(file: str) -> str:
    if file.startswith("<frozen"):
        return "stdlib (frozen)"
    head = file.split("/", 1)[0]
    return head.removesuffix(".py")


def record(title: str, pid: int, seconds: float, load: Callable[[], object]) -> Profile:
    """Profiles ``pid`` for ``seconds`` while ``load()`` runs in a thread of this process."""
    binary = py_spy()
    if binary is None:
        return Profile(title, skipped="py-spy not installed (pip install py-spy)")
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        done = subprocess.run(
            [
                binary, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", str(RATE),
                "-f", "raw", "-o", out.name, "--nonblocking",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=False,
        )  # fmt: skip
        worker.join(seconds + 60)
        if done.returncode != 0:
            return Profile(title, skipped=f"py-spy failed: {done.stderr.strip()[-300:]}")
        return summarise(title, Path(out.name).read_text())


def summarise(title: str, raw: str, top: int = 12) -> Profile:
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_label(f) for f in stack.split(";") if f]
        if not frames:
            continue
        leaf, package = frames[-1]
        self_counts[leaf] += count
        packages[package] += count
        for name in {name for name, _ in frames}:
            inclusive[name] += count
    if total == 0:
        return Profile(title, skipped="no samples")

    def share(counter: Counter[str], n: int) -> list[tuple[str, float]]:
        return [(name, 100 * c / total) for name, c in counter.most_common(n)]

    # Inclusive time of the outermost frames is ~100% and says nothing; keep the informative.
    informative = Counter(
        {name: c for name, c in inclusive.items() if c < 0.95 * total and "runpy" not in name}
    )
    return Profile(
        title,
        samples=total,
        self_top=share(self_counts, top),
        inclusive_top=share(informative, top + 6),
        packages=share(packages, 10),
    )
