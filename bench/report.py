"""The run's table on stdout, ``docs/benchmarks.md`` and ``docs/benchmarks.png``."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._util import Result
from .profiles import Profile

if TYPE_CHECKING:
    from .__main__ import Run

ANALYSIS = Path(__file__).with_name("ANALYSIS.md")
SAVED = Path(tempfile.gettempdir()) / "volcano-bench-last.json"

# Display order of the cycle results: (key, group label).
ROWS = [
    ("noop.raw_sync", "HTTP ceiling"),
    ("noop.httpx_async16", "HTTP ceiling"),
    ("noop.aiohttp_async16", "HTTP ceiling"),
    ("sqlite.raw_sync", "SQLite"),
    ("sqlite.sdk_sync1", "SQLite"),
    ("sqlite_nolog.sdk_sync1", "SQLite"),
    ("sqlite.sdk_sync16", "SQLite"),
    ("sqlite.sdk_async1", "SQLite"),
    ("sqlite.sdk_async16", "SQLite"),
    ("sqlite.sdk_async1_aiohttp", "SQLite"),
    ("sqlite.sdk_async16_aiohttp", "SQLite"),
    ("sqlite.sdk_async16_sniffio", "SQLite"),
    ("sqlite.httpx_async16", "SQLite"),
    ("sqlite.aiohttp_async16", "SQLite"),
    ("pg.raw_sync", "PostgreSQL"),
    ("pg.sdk_sync1", "PostgreSQL"),
    ("pg.sdk_sync16", "PostgreSQL"),
    ("pg.sdk_async1", "PostgreSQL"),
    ("pg.sdk_async16", "PostgreSQL"),
    ("pg.sdk_async1_aiohttp", "PostgreSQL"),
    ("pg.sdk_async16_aiohttp", "PostgreSQL"),
    ("peer.redis", "peers"),
    ("peer.pg", "peers"),
    ("peer.etcd", "peers"),
    ("wrk.noop", "wrk, 16 connections"),
    ("wrk.sqlite", "wrk, 16 connections"),
    ("wrk.pg", "wrk, 16 connections"),
    ("mock.raw_sync", "client CPU only"),
    ("mock.sdk_sync", "client CPU only"),
]


def rate_text(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


@dataclass
class Target:
    what: str
    target: str
    a: str
    b: str
    ratio: float | None
    passed: bool | None
    why: str = ""

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "n/a"
        return "PASS" if self.passed else "MISS"


def _rate(run: Run, key: str) -> float | None:
    result = run.results.get(key)
    return None if result is None else result.rate


def _ratio_target(
    run: Run, what: str, target: str, a_key: str, b_key: str, low: float, why: str = ""
) -> Target:
    a, b = _rate(run, a_key), _rate(run, b_key)
    a_name = _describe(run, a_key)
    b_name = _describe(run, b_key)
    if a is None or b is None or b == 0:
        return Target(what, target, a_name, b_name, None, None, "an input was skipped")
    ratio = a / b
    return Target(
        what, target, f"{a_name}: {a:,.0f}", f"{b_name}: {b:,.0f}", ratio, ratio >= low, why
    )


def _describe(run: Run, key: str) -> str:
    result = run.results.get(key)
    if result is None:
        return key
    group = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(result.group, result.group)
    return f"{result.name} ({group})" if group not in ("peers", "?") else result.name


def targets(run: Run) -> list[Target]:
    out = [
        _ratio_target(
            run, "sync SDK cycle vs raw httpx, same server (SQLite)", ">= 0.9x",
            "sqlite.sdk_sync1", "sqlite.raw_sync", 0.9,
        ),
        _ratio_target(
            run, "full stack on SQLite vs the no-op HTTP ceiling (2 requests/cycle)", ">= 0.6x",
            "sqlite.sdk_sync1", "noop.raw_sync", 0.6,
        ),
        _ratio_target(
            run, "full stack (SQLite, sync SDK, 1 thread) vs etcd", ">= 2.5x",
            "sqlite.sdk_sync1", "peer.etcd", 2.5,
        ),
        _ratio_target(
            run, "async SDK, 16 tasks vs sync SDK, 1 thread (SQLite)", ">= 1.0x",
            "sqlite.sdk_async16", "sqlite.sdk_sync1", 1.0,
        ),
    ]  # fmt: skip
    big = next((g for g in run.guards if g.get("n") == 10_000), None)
    if big is None or "skipped" in big:
        why = "not run" if big is None else str(big["skipped"])
        out.append(
            Target("10,000 guards", "<= 4 threads, 0 late, 0 lost", "-", "-", None, None, why)
        )
    else:
        threads, late, lost = big["sdk_threads"], big["late"], big["lost"]
        ok = int(threads) <= 4 and late == 0 and lost == 0
        out.append(
            Target(
                "10,000 guards: renewal threads, late and lost renewals",
                "<= 4 threads, 0 late, 0 lost",
                f"{threads} threads, {late} late, {lost} lost",
                f"TTL {big['ttl']} s: {float(big['renewal_demand']):,.0f} renewals/s needed, "
                f"{float(big['renewal_rate_hold']):,.0f}/s done",
                None,
                ok,
            )
        )
    if run.imports is None:
        out.append(Target("import volcano_sdk", "<= 1.25x", "-", "-", None, None, "not run"))
    else:
        sdk, floor = float(run.imports["sdk_ms"]), float(run.imports["floor_ms"])
        out.append(
            Target(
                "`import volcano_sdk` vs `import httpx, attrs` (fresh interpreter, median)",
                "<= 1.25x",
                f"volcano_sdk: {sdk:.0f} ms",
                f"httpx, attrs: {floor:.0f} ms",
                sdk / floor,
                sdk / floor <= 1.25,
            )
        )
    return out


COMPANIONS = [
    (
        "client CPU: SDK vs raw httpx over an in-process mock transport (no server)",
        "mock.sdk_sync",
        "mock.raw_sync",
    ),
    (
        "server access log off vs on: SDK sync 1 thread (SQLite)",
        "sqlite_nolog.sdk_sync1",
        "sqlite.sdk_sync1",
    ),
    (
        "full stack on SQLite, server without access log, vs the no-op ceiling",
        "sqlite_nolog.sdk_sync1",
        "noop.raw_sync",
    ),
    ("sync SDK vs raw httpx (PostgreSQL)", "pg.sdk_sync1", "pg.raw_sync"),
    ("full stack on PostgreSQL vs etcd", "pg.sdk_sync1", "peer.etcd"),
    (
        "async SDK 16 tasks, aiohttp transport prototype, vs sync SDK 1 thread (SQLite)",
        "sqlite.sdk_async16_aiohttp",
        "sqlite.sdk_sync1",
    ),
    ("async SDK 16 tasks vs sync SDK 1 thread (PostgreSQL)", "pg.sdk_async16", "pg.sdk_sync1"),
    (
        "async SDK 16 tasks, aiohttp transport prototype, vs sync SDK 1 thread (PostgreSQL)",
        "pg.sdk_async16_aiohttp",
        "pg.sdk_sync1",
    ),
    ("sync SDK 16 threads vs 1 thread (SQLite)", "sqlite.sdk_sync16", "sqlite.sdk_sync1"),
    (
        "async SDK 16 tasks, sniffio import failure cached (prototype), vs sync SDK 1 thread",
        "sqlite.sdk_async16_sniffio",
        "sqlite.sdk_sync1",
    ),
    (
        "async SDK 1 task: aiohttp transport prototype vs httpx (SQLite)",
        "sqlite.sdk_async1_aiohttp",
        "sqlite.sdk_async1",
    ),
    ("full stack (SQLite) vs Redis", "sqlite.sdk_sync1", "peer.redis"),
    ("full stack (SQLite) vs PostgreSQL lease table", "sqlite.sdk_sync1", "peer.pg"),
    ("server on SQLite vs no-op endpoint, both under wrk", "wrk.sqlite", "wrk.noop"),
    ("server on PostgreSQL vs no-op endpoint, both under wrk", "wrk.pg", "wrk.noop"),
    (
        "raw httpx.AsyncClient 16 tasks vs aiohttp 16 tasks (no-op)",
        "noop.httpx_async16",
        "noop.aiohttp_async16",
    ),
]


def companions(run: Run) -> list[Target]:
    """Informative ratios without a target of their own."""
    return [_ratio_target(run, what, "info", a, b, 0) for what, a, b in COMPANIONS]


def _cycle_rows(run: Run) -> list[tuple[str, Result]]:
    return [(group, run.results[key]) for key, group in ROWS if key in run.results]


def text(run: Run, meta: dict[str, object]) -> str:
    lines = [f"Volcano Locks benchmark, {meta['date']}, {meta['machine']}", ""]
    lines.append(
        f"{'group':<20} {'setup':<58} {'cycles/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'err':>5}"
    )
    for group, r in _cycle_rows(run):
        if r.skipped:
            lines.append(f"{group:<20} {r.name:<58} skipped: {r.skipped}")
            continue
        lines.append(
            f"{group:<20} {r.name:<58} {rate_text(r.rate):>9} {_ms(r.p50_ms):>7} "
            f"{_ms(r.p99_ms):>7} {r.errors:>5}"
        )
    lines += ["", "Guard scaling (SQLite):"]
    for g in run.guards:
        lines.append("  " + _guard_line(g))
    if run.imports:
        lines.append(
            f"\nimport volcano_sdk {float(run.imports['sdk_ms']):.0f} ms, "
            f"import httpx, attrs {float(run.imports['floor_ms']):.0f} ms"
        )
    lines += ["", "Targets:"]
    for t in targets(run) + companions(run):
        ratio = "-" if t.ratio is None else f"{t.ratio:.2f}x"
        verdict = "info" if t.target == "info" else t.verdict
        lines.append(f"  [{verdict:>4}] {t.what}: {ratio} ({t.target}) {t.a} / {t.b} {t.why}")
    for note in meta["notes"]:
        lines.append(f"note: {note}")
    lines.append(f"\nwhole run: {float(meta['elapsed_s']):.0f} s")
    return "\n".join(lines)


def _guard_line(g: dict[str, object]) -> str:
    if "skipped" in g:
        return f"N={g['n']}: skipped ({g['skipped']})"
    return (
        f"N={g['n']:,} TTL={g['ttl']}s: acquired in {float(g['acquire_s']):.1f}s, "
        f"{g['sdk_threads']} SDK threads, {g['late']} late, {g['lost']} lost, "
        f"renewals {float(g['renewal_rate_hold']):,.0f}/s done, "
        f"{float(g['renewal_demand']):,.0f}/s needed, "
        f"{float(g['rss_per_guard']) / 1024:.1f} KiB RSS/guard"
    )


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def markdown(run: Run, meta: dict[str, object]) -> str:
    md = [
        "# Benchmarks",
        "",
        "Written by `scripts/bench` (issue 6); do not edit by hand except `bench/ANALYSIS.md`,",
        "which is copied in at the end. Every figure below comes from one run; compare them as",
        "ratios only, because this machine's noise is up to 1.8x from run to run.",
        "",
        f"- Run: {meta['date']}, {meta['machine']}, {float(meta['elapsed_s']):.0f} s in all.",
        f"- Load average (1 min) of the machine, shared with other sessions: {meta['load']}.",
        f"- Code: {meta['revision']}"
        + (
            " (exported to a temporary folder by `scripts/bench --committed`)."
            if str(meta["revision"]).endswith("as committed")
            else " (the working tree as it was, other sessions' uncommitted changes included)."
        ),
        "- Method: a cycle is one acquire plus one release of a key owned by that thread or "
        "task (no contention); latency is per cycle. All one-thread sync setups (the ceiling, "
        "raw httpx, the sync SDK, the peers) run on one thread in turns of 0.25 s until each has "
        f"had {float(meta['seconds']) * int(meta['rounds']):.0f} s, so load from elsewhere hits "
        f"them alike; the multi-thread and async setups run {meta['seconds']} s each in "
        f"{meta['rounds']} interleaved rounds, the best round kept. Everything on 127.0.0.1, "
        "servers started and stopped by the script. The volcano-locks servers run as shipped "
        "(`volcano-locks serve`, 1 worker, access log on, SQLite with `synchronous=FULL`), plus "
        "one SQLite server with `--no-access-log` as an A/B.",
        "- Reproduce: `scripts/bench` (about 6 minutes; `--quick` for a 2-minute smoke run).",
        "",
        "![cycles per second and guard scaling](benchmarks.png)",
        "",
        "## Targets",
        "",
    ]
    rows = []
    for t in targets(run):
        ratio = "-" if t.ratio is None else f"**{t.ratio:.2f}x**"
        rows.append([t.what, t.target, ratio, f"**{t.verdict}**", f"{t.a} / {t.b} {t.why}".strip()])
    md += _md_table(["what", "target", "measured", "verdict", "figures (this run)"], rows)
    md += ["", "Companion ratios (no target):", ""]
    rows = []
    for t in companions(run):
        rows.append(
            [
                t.what,
                "-" if t.ratio is None else f"{t.ratio:.2f}x",
                f"{t.a} / {t.b} {t.why}".strip(),
            ]
        )
    md += _md_table(["what", "ratio", "figures"], rows)
    md += ["", "## Acquire+release cycles", ""]
    rows = []
    for group, r in _cycle_rows(run):
        if r.skipped:
            rows.append([group, r.name, "skipped", "", "", "", r.skipped])
            continue
        note = r.note
        if "us_per_cycle" in r.extra:
            note = f"{float(r.extra['us_per_cycle']):.0f} µs of client CPU per cycle"
        rows.append(
            [group, r.name, rate_text(r.rate), _ms(r.p50_ms), _ms(r.p99_ms), str(r.errors), note]
        )
    md += _md_table(["group", "setup", "cycles/s", "p50 ms", "p99 ms", "errors", "note"], rows)
    md += [
        "",
        "The HTTP-ceiling and raw rows send the SDK's exact two requests (same headers and JSON)"
        " with a bare client; the wrk rows drive the servers with a C load generator, 16 "
        "connections, one key per connection (`bench/cycle.lua`), so the client is not the "
        "limit; their latency is per request.",
        "",
        "## Guard scaling",
        "",
        "N concurrent `with_lock` guards in one process against the SQLite server; entered from "
        "16 bench threads (then stopped), held, then exited. *Late*: a renewal that came back "
        "with less than TTL/3 left before the old lease's local deadline (it is due with 2/3 "
        "left), or one still outstanding that long after it was due at the end of the hold. "
        "*Lost*: `guard.lost` became True. *SDK threads*: threads named `volcano-*`, sampled "
        "during the hold. Memory: RSS growth per guard; tracemalloc's retained bytes per guard "
        "where N <= 1,000.",
        "",
    ]
    rows = []
    for g in run.guards:
        if "skipped" in g:
            rows.append([f"{g['n']:,}", str(g["ttl"]), "skipped: " + str(g["skipped"])] + [""] * 9)
            continue
        traced = g.get("traced_per_guard")
        rows.append(
            [
                f"{g['n']:,}",
                f"{g['ttl']} s / {float(g['hold_s']):.0f} s",
                f"{float(g['acquire_s']):.1f} s",
                f"{g['sdk_threads']} ({', '.join(g['sdk_thread_names'])})",
                f"{float(g['renewal_demand']):,.0f}",
                f"{float(g['renewal_rate_hold']):,.0f}",
                f"{g['renewals']:,}",
                f"{g['late']:,} ({g['overdue_at_end']:,} outstanding)",
                f"{g['lost']:,}",
                "-"
                if g["min_margin_s"] is None
                else f"{float(g['min_margin_s']):.2f} / {float(g['p50_margin_s']):.2f}",
                f"{float(g['rss_per_guard']) / 1024:.1f} KiB",
                "-" if traced is None else f"{float(traced) / 1024:.1f} KiB",
            ]
        )
    md += _md_table(
        [
            "N", "TTL / hold", "acquiring took", "SDK threads", "renewals/s needed",
            "renewals/s done", "renewals", "late", "lost", "margin min / p50 (s)",
            "RSS/guard", "traced/guard",
        ],
        rows,
    )  # fmt: skip
    if run.imports:
        md += [
            "",
            "## Import time",
            "",
            f"Fresh interpreter, the import statement alone timed inside it, median of "
            f"{run.imports['runs']} interleaved runs: `import volcano_sdk` "
            f"{float(run.imports['sdk_ms']):.0f} ms, `import httpx, attrs` "
            f"{float(run.imports['floor_ms']):.0f} ms. What the SDK adds on top of its floor "
            "(`python -X importtime -c 'import httpx, attrs; import volcano_sdk'`, biggest "
            "cumulative first, nested rows included):",
            "",
        ]
        md += _md_table(
            ["module", "self ms", "cumulative ms"],
            [[f"`{m}`", f"{s:.1f}", f"{c:.1f}"] for m, s, c in run.imports["top"]],
        )
    md += ["", "## Profiles", ""]
    md.append(
        "py-spy, 250 samples/s, on-CPU samples only, frames without line numbers. *self*: the "
        "sample's innermost frame; *inclusive*: the frame anywhere on the stack."
    )
    for p in run.profiles:
        md += ["", f"### {p.title}", ""]
        if p.skipped:
            md.append(f"Skipped: {p.skipped}")
            continue
        md.append(f"{p.samples:,} samples. By package (self time):")
        md.append("")
        md.append(", ".join(f"{name} {pct:.0f}%" for name, pct in p.packages))
        md.append("")
        width = max(len(p.self_top), len(p.inclusive_top))
        rows = []
        for i in range(width):
            s = p.self_top[i] if i < len(p.self_top) else ("", 0.0)
            c = p.inclusive_top[i] if i < len(p.inclusive_top) else ("", 0.0)
            rows.append(
                [
                    f"`{s[0]}`" if s[0] else "", f"{s[1]:.1f}%" if s[0] else "",
                    f"`{c[0]}`" if c[0] else "", f"{c[1]:.1f}%" if c[0] else "",
                ]
            )  # fmt: skip
        md += _md_table(["top self", "%", "top inclusive", "%"], rows)
    if meta["notes"]:
        md += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    if ANALYSIS.exists():
        md += ["", ANALYSIS.read_text().strip()]
    return "\n".join(md) + "\n"


def plot(run: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "HTTP ceiling": "#999999",
        "SQLite": "#d95f02",
        "PostgreSQL": "#1b9e77",
        "peers": "#7570b3",
        "wrk, 16 connections": "#e7298a",
    }
    rows = [(g, r) for g, r in _cycle_rows(run) if r.rate is not None]
    fig, (ax, ax2) = plt.subplots(
        1, 2, figsize=(15, 8), gridspec_kw={"width_ratios": [3, 1.3]}, layout="constrained"
    )
    labels = [f"{r.name} [{g}]" for g, r in rows]
    values = [r.rate or 0.0 for _, r in rows]
    ax.barh(range(len(rows)), values, color=[colors.get(g, "#444444") for g, _ in rows])
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("acquire+release cycles per second (log scale)")
    ax.set_title("Cycles per second, one run")
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=7)
    done = [g for g in run.guards if "skipped" not in g]
    if done:
        x = range(len(done))
        ax2.bar(
            [i - 0.2 for i in x],
            [float(g["renewal_demand"]) for g in done],
            0.4,
            label="renewals/s needed",
        )
        ax2.bar(
            [i + 0.2 for i in x],
            [float(g["renewal_rate_hold"]) for g in done],
            0.4,
            label="renewals/s done",
        )
        ax2.set_xticks(
            list(x),
            [f"N={g['n']:,}\nTTL {g['ttl']}s\n{g['late']} late, {g['lost']} lost" for g in done],
            fontsize=8,
        )
        ax2.set_yscale("log")
        ax2.set_title("with_lock guards: renewals/s needed vs done", fontsize=10)
        ax2.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(run: Run, meta: dict[str, object], docs: Path) -> None:
    docs.mkdir(exist_ok=True)
    (docs / "benchmarks.md").write_text(markdown(run, meta))
    plot(run, docs / "benchmarks.png")


def save(run: Run, meta: dict[str, object], path: Path) -> None:
    """The run's raw figures, so ``--render`` can rewrite docs/ after ANALYSIS.md changes."""
    data = {
        "meta": meta,
        "results": {k: dataclasses.asdict(r) for k, r in run.results.items()},
        "profiles": [dataclasses.asdict(p) for p in run.profiles],
        "guards": run.guards,
        "imports": run.imports,
    }
    path.write_text(json.dumps(data, indent=1))


def load(path: Path, run: Run) -> tuple[Run, dict[str, object]]:
    data = json.loads(path.read_text())
    run.results = {k: Result(**r) for k, r in data["results"].items()}
    run.profiles = [Profile(**p) for p in data["profiles"]]
    run.guards = data["guards"]
    run.imports = data["imports"]
    return run, data["meta"]
