"""The ``volcano-locks`` command: lock administration here, server commands in volcano_server.

    volcano-locks locks get KEY [--json]
    volcano-locks locks list [--prefix P] [--json]
    volcano-locks locks force-release KEY [--yes] [--json]
    volcano-locks serve | projects | migrate ...      (needs the `server` extra)

The ``locks`` commands are built on the SDK alone, so an operator needs neither the server nor
its dependencies. They read ``VOLCANO_ANON_KEY``, ``VOLCANO_SERVICE_KEY`` and
``VOLCANO_API_URL`` (default https://api.volcano.dev), print human-readable text, or JSON with
``--json``. Exit status: 0 done, 1 the service refused or failed, 2 bad usage or configuration,
3 force-release not confirmed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from ._client import DEFAULT_API_URL, VolcanoClient
from ._errors import VolcanoError
from ._models import LockState

__all__ = ["main"]

LIST_PAGE_SIZE = 100


class _UsageError(Exception):
    pass


def _client_from_env(environ: dict[str, str]) -> VolcanoClient:
    missing = [n for n in ("VOLCANO_ANON_KEY", "VOLCANO_SERVICE_KEY") if not environ.get(n)]
    if missing:
        raise _UsageError(f"set {' and '.join(missing)} (the project's keys) first")
    return VolcanoClient(
        environ["VOLCANO_ANON_KEY"],
        environ["VOLCANO_SERVICE_KEY"],
        environ.get("VOLCANO_API_URL") or DEFAULT_API_URL,
    )


def _state_json(state: LockState) -> dict[str, object]:
    return {
        "key": state.key,
        "held": state.held,
        "expires_at": None if state.expires_at is None else state.expires_at.isoformat(),
        "fencing_token": state.fencing_token,
    }


def _describe(state: LockState, now: datetime.datetime) -> str:
    if state.held and state.expires_at is not None:
        left = max(0.0, (state.expires_at - now).total_seconds())
        return (
            f"{state.key}: held, fencing token {state.fencing_token}, "
            f"expires {state.expires_at.isoformat()} (in {left:.0f}s)"
        )
    if state.fencing_token is None:
        return f"{state.key}: free, never acquired"
    return f"{state.key}: free, last fencing token {state.fencing_token}"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _get(client: VolcanoClient, args: argparse.Namespace, out: TextIO) -> int:
    state = client.locks.get(args.key)
    print(json.dumps(_state_json(state)) if args.json else _describe(state, _now()), file=out)
    return 0


def _list(client: VolcanoClient, args: argparse.Namespace, out: TextIO) -> int:
    states: list[LockState] = []
    after: str | None = None
    while True:
        page = client.locks.list(prefix=args.prefix, after=after, limit=LIST_PAGE_SIZE)
        states.extend(page.locks)
        if page.next_after is None:
            break
        after = page.next_after
    if args.json:
        print(json.dumps([_state_json(s) for s in states]), file=out)
    elif not states:
        print("no held locks" + (f" under {args.prefix!r}" if args.prefix else ""), file=out)
    else:
        now = _now()
        for state in states:
            print(_describe(state, now), file=out)
    return 0


def _force_release(
    client: VolcanoClient,
    args: argparse.Namespace,
    out: TextIO,
    ask: Callable[[str], str],
    interactive: bool,
) -> int:
    if not args.yes:
        if not interactive:
            print(
                "volcano-locks: force-release needs confirmation; pass --yes when not at a "
                "terminal",
                file=sys.stderr,
            )
            return 3
        state = client.locks.get(args.key)
        prompt = (
            f"Force-release {_describe(state, _now())}?\n"
            "Only the protected store's fencing stops the current holder. [y/N] "
        )
        if ask(prompt).strip().lower() not in ("y", "yes"):
            print("not released", file=out)
            return 3
    removed = client.locks.force_release(args.key)
    if args.json:
        print(json.dumps({"key": args.key, "removed": removed}), file=out)
    else:
        print(f"{args.key}: " + ("lease removed" if removed else "was not held"), file=out)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="volcano-locks locks", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("get", help="show a lock's state without acquiring it")
    get.add_argument("key")
    listing = commands.add_parser("list", help="list held locks")
    listing.add_argument("--prefix", default=None, help="only keys starting with this")
    force = commands.add_parser("force-release", help="remove a lease without its token")
    force.add_argument("key")
    force.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for sub in (get, listing, force):
        sub.add_argument("--json", action="store_true", help="print JSON")
    return parser


def locks_main(
    argv: Sequence[str],
    *,
    environ: dict[str, str] | None = None,
    out: TextIO | None = None,
    ask: Callable[[str], str] = input,
    interactive: bool | None = None,
) -> int:
    args = _parser().parse_args(list(argv))
    out = out or sys.stdout
    try:
        with _client_from_env(dict(os.environ) if environ is None else environ) as client:
            if args.command == "get":
                return _get(client, args, out)
            if args.command == "list":
                return _list(client, args, out)
            tty = sys.stdin.isatty() if interactive is None else interactive
            return _force_release(client, args, out, ask, tty)
    except (_UsageError, ValueError, TypeError) as exc:
        print(f"volcano-locks: {exc}", file=sys.stderr)
        return 2
    except VolcanoError as exc:
        print(f"volcano-locks: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["locks"]:
        return locks_main(args[1:])
    try:
        from volcano_server.cli import main as server_main
    except ImportError:
        if args[:1] in ([], ["-h"], ["--help"]):
            print(__doc__)
            return 0
        print(
            "volcano-locks: the server commands need the server extra: "
            "pip install 'volcano-sdk[server]'",
            file=sys.stderr,
        )
        return 2
    return server_main(args)
