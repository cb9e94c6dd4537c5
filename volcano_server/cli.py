"""The `volcano-locks` command: run the service and manage projects.

    volcano-locks serve [--database URL] [--host H] [--port P] [--workers N]
    volcano-locks projects create NAME [--database URL] [--json]
    volcano-locks projects list [--database URL] [--json]
    volcano-locks projects rotate-service-key NAME [--database URL] [--json]
    volcano-locks migrate [--database URL]

The database is `--database`, else `$VOLCANO_DATABASE_URL`, else the SQLite file
`$XDG_DATA_HOME/volcano-locks/locks.db` (`~/.local/share/volcano-locks/locks.db`).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from . import __version__
from ._auth import ANON_PREFIX, SERVICE_PREFIX, hash_key, new_key
from .storage import (
    LATEST_VERSION,
    ProjectExists,
    ProjectNotFound,
    SchemaTooNew,
    StorageUnavailable,
    Store,
    open_store,
)

__all__ = ["default_database_url", "main"]

T = TypeVar("T")
_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def default_database_url() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return "sqlite:///" + str(Path(data_home) / "volcano-locks" / "locks.db")


def _database_url(args: argparse.Namespace) -> str:
    url: str = args.database or os.environ.get("VOLCANO_DATABASE_URL") or default_database_url()
    return url


class _Fail(Exception):
    """A clear message for the user, exit status 1 (or `code`)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _with_store(url: str, fn: Callable[[Store], Awaitable[T]]) -> T:
    async def run() -> T:
        try:
            store = open_store(url)
        except ValueError as exc:
            raise _Fail(str(exc), 2) from exc
        try:
            await store.open()
        except SchemaTooNew as exc:
            raise _Fail(str(exc), 3) from exc
        except StorageUnavailable as exc:
            raise _Fail(f"cannot open the database: {exc}") from exc
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(run())


def _check_name(name: str) -> str:
    if _PROJECT_NAME.fullmatch(name) is None:
        raise _Fail("a project name is 1 to 63 characters from A-Z a-z 0-9 _ . - ", 2)
    return name


def _projects_create(args: argparse.Namespace) -> None:
    name = _check_name(args.name)
    anon, service = new_key(ANON_PREFIX), new_key(SERVICE_PREFIX)

    async def create(store: Store) -> None:
        try:
            await store.create_project(name, hash_key(anon), hash_key(service))
        except ProjectExists as exc:
            raise _Fail(f"project {name!r} exists already") from exc

    _with_store(_database_url(args), create)
    if args.json:
        print(json.dumps({"project": name, "anon_key": anon, "service_key": service}))
    else:
        print(f"Created project {name}.")
        print(f"  anon key:    {anon}")
        print(f"  service key: {service}")
        print("Store both now: they are shown only once (the database keeps only hashes).")


def _projects_list(args: argparse.Namespace) -> None:
    projects = _with_store(_database_url(args), lambda s: s.list_projects())
    if args.json:
        out = [
            {
                "project": p.name,
                "created_at": p.created_at.isoformat(),
                "active_service_keys": p.service_keys,
            }
            for p in projects
        ]
        print(json.dumps(out))
        return
    if not projects:
        print("No projects. Create one with: volcano-locks projects create NAME")
    for p in projects:
        created = p.created_at.isoformat(timespec="seconds")
        print(f"{p.name}\tcreated {created}\t{p.service_keys} active service key(s)")


def _projects_rotate(args: argparse.Namespace) -> None:
    name = _check_name(args.name)
    service = new_key(SERVICE_PREFIX)

    async def rotate(store: Store) -> None:
        try:
            await store.rotate_service_key(name, hash_key(service))
        except ProjectNotFound as exc:
            raise _Fail(f"no project named {name!r}") from exc

    _with_store(_database_url(args), rotate)
    if args.json:
        print(json.dumps({"project": name, "service_key": service}))
    else:
        print(f"New service key for {name}: {service}")
        print("Every previous service key of the project is revoked (servers may accept it")
        print("for up to their auth cache time, 2 s by default).")


def _migrate(args: argparse.Namespace) -> None:
    version = _with_store(_database_url(args), lambda s: s.schema_version())
    print(f"schema version {version} (latest {LATEST_VERSION})")


def _log_config(level: str) -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    # Our own access logger replaces uvicorn's, whose lines would carry the request path
    # (and so the lock key).  Ours logs the route template, status, duration and request id.
    config["loggers"]["volcano_server"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    # asyncpg's pool logs a full traceback each time it fails to restore its floor during an
    # outage; our own one-line warnings (and /ready) already say the database is away.
    config["loggers"]["asyncpg"] = {"handlers": ["default"], "level": "ERROR", "propagate": False}
    return config


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    url = _database_url(args)
    # Create or upgrade the schema once, before any worker starts, and fail early and clearly.
    _with_store(url, lambda s: s.schema_version())
    os.environ["VOLCANO_DATABASE_URL"] = url
    os.environ["VOLCANO_AUTH_CACHE_SECONDS"] = str(args.auth_cache_seconds)
    os.environ["VOLCANO_SWEEP_INTERVAL"] = str(args.sweep_interval)
    os.environ["VOLCANO_ACCESS_LOG"] = "0" if args.no_access_log else "1"
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal under the
    # handler that was installed before it started.  With the default handler the process would
    # die of the signal after a clean shutdown; with this one it exits with status 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
    uvicorn.run(
        "volcano_server._app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        # uvloop and httptools (measured fastest here) when installed, as uvicorn[standard] does.
        loop="auto",
        http="auto",
        lifespan="on",
        access_log=False,  # see _log_config
        log_config=_log_config(args.log_level),
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
        server_header=False,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="volcano-locks", description="Volcano Locks reference service."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def database(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--database",
            metavar="URL",
            help="sqlite:///path.db or postgresql://... "
            "(default: $VOLCANO_DATABASE_URL, else " + default_database_url() + ")",
        )

    serve = commands.add_parser("serve", help="run the HTTP service")
    database(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--no-access-log", action="store_true")
    serve.add_argument(
        "--auth-cache-seconds",
        type=float,
        default=2.0,
        help="how long a verified key pair is cached; bounds how late a revocation bites",
    )
    serve.add_argument(
        "--sweep-interval",
        type=float,
        default=60.0,
        help="seconds between housekeeping sweeps (0 disables them)",
    )
    serve.set_defaults(func=_serve)

    migrate = commands.add_parser("migrate", help="create or upgrade the schema, then exit")
    database(migrate)
    migrate.set_defaults(func=_migrate)

    projects = commands.add_parser("projects", help="manage projects and their keys")
    sub = projects.add_subparsers(dest="projects_command", required=True)
    create = sub.add_parser("create", help="create a project; prints its keys once")
    create.add_argument("name")
    database(create)
    create.add_argument("--json", action="store_true")
    create.set_defaults(func=_projects_create)
    listing = sub.add_parser("list", help="list projects")
    database(listing)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_projects_list)
    rotate = sub.add_parser(
        "rotate-service-key", help="revoke the project's service keys and print a new one"
    )
    rotate.add_argument("name")
    database(rotate)
    rotate.add_argument("--json", action="store_true")
    rotate.set_defaults(func=_projects_rotate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        args.func(args)
    except _Fail as exc:
        print(f"volcano-locks: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return 0
