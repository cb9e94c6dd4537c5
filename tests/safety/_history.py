"""The history of a chaos run: every event of every worker, on one monotonic clock.

An event is a flat JSON object, one per line in a per-process file::

    {"t": 12.345678, "p": "w3", "op": "w3:17", "type": "invoke", "f": "acquire", ...}

- ``t``: ``time.monotonic()``. On Linux this is CLOCK_MONOTONIC, one clock for every process of
  the machine, so histories of separate processes merge by ``t`` alone.
- ``p``: the process (or thread) that recorded it; ``op`` pairs an invoke with its completion.
- ``type``: ``invoke``, then ``ok`` (it happened), ``fail`` (it certainly did not happen) or
  ``unknown`` (it may have); ``info`` for one-off facts (observations, faults, final state).
- ``f``: what: the wire operations ``acquire``, ``renew``, ``release``, ``force_release``,
  ``get`` (recorded by ``RecordingTransport`` under the SDK, so the guard's own renewals and
  releases are in the history too), and the application's ``claim``, ``write``, ``observe``,
  ``recover``, ``fault`` and ``resource``.

Ownership tokens are recorded: the checker needs them to tell holders apart. A history is a test
artifact of a throwaway project; never record a production token.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

__all__ = [
    "AsyncRecordingTransport",
    "Event",
    "Recorder",
    "RecordingTransport",
    "load",
    "parse_time",
    "write_events",
]

Event = dict[str, Any]


def parse_time(text: str) -> float:
    """A service timestamp (ISO 8601) as POSIX seconds; the service clock, not ours."""
    return datetime.datetime.fromisoformat(text).timestamp()


class Recorder:
    """Appends events of one process to a JSONL file; safe to share between threads.

    Each line is flushed at once: a worker that is SIGSTOPped or killed loses nothing it
    recorded before.
    """

    def __init__(self, path: Path | str | None, process: str) -> None:
        self.process = process
        self.path = Path(path) if path is not None else None
        self._file = None if self.path is None else self.path.open("a", buffering=1)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.events: list[Event] = []  # kept in memory too when there is no file

    def new_op(self) -> str:
        return f"{self.process}:{next(self._ids)}"

    def record(self, type_: str, f: str, op: str | None = None, **fields: Any) -> Event:
        event: Event = {"t": time.monotonic(), "p": self.process, "type": type_, "f": f}
        if op is not None:
            event["op"] = op
        event.update(fields)
        line = json.dumps(event, separators=(",", ":"), default=str)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
            else:
                self.events.append(event)
        return event

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def child(self, process: str) -> Recorder:
        """A recorder for a thread of this process, writing to its own file beside this one."""
        path = None if self.path is None else self.path.with_name(f"{process}.jsonl")
        return Recorder(path, process)


def _wire_call(request: httpx.Request) -> tuple[str, str] | None:
    """(operation, key) of a lock call, from its raw path ``/locks/v1/locks/{key}[/verb]``."""
    raw = request.url.raw_path.decode("ascii").split("?", 1)[0]
    prefix = "/locks/v1/locks/"
    if not raw.startswith(prefix):
        return None
    rest = raw[len(prefix) :]
    key, _, verb = rest.partition("/")
    if request.method == "GET" and not verb:
        return "get", unquote(key)
    return {"acquire": "acquire", "renew": "renew", "release": "release"}.get(
        verb, "force_release" if verb == "force-release" else verb
    ), unquote(key)


def _invoke(recorder: Recorder, request: httpx.Request) -> tuple[str, str, dict[str, Any]] | None:
    call = _wire_call(request)
    if call is None:
        return None
    f, key = call
    fields: dict[str, Any] = {"key": key, "rid": request.headers.get("x-request-id")}
    if request.content:
        body = json.loads(request.content)
        fields.update({k: body[k] for k in ("token", "ttl") if k in body})
    op = recorder.new_op()
    recorder.record("invoke", f, op, **fields)
    return f, op, fields


def _complete(
    recorder: Recorder, f: str, op: str, fields: dict[str, Any], response: httpx.Response
) -> None:
    status = response.status_code
    try:
        answer = json.loads(response.content)
    except ValueError:
        answer = None
    if 200 <= status < 300 and isinstance(answer, dict):
        extra = {
            name: answer[src]
            for name, src in (
                ("fence", "fencing_token"),
                ("expires", "expires_at"),
                ("released", "released"),
                ("removed", "removed"),
                ("held", "held"),
            )
            if src in answer
        }
        recorder.record("ok", f, op, **fields, status=status, **extra)
    elif 400 <= status < 500:
        code = None
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            code = answer["error"].get("code")
        recorder.record("fail", f, op, **fields, status=status, code=code)
    else:
        recorder.record("unknown", f, op, **fields, status=status)


class RecordingTransport(httpx.BaseTransport):
    """Wraps the SDK's transport: every lock request becomes invoke, then ok, fail or unknown.

    ok: a 2xx with a readable body; fail: a 4xx (the service refused: nothing changed);
    unknown: no answer, a 5xx or an unreadable 2xx (the request may have taken effect).
    """

    def __init__(self, recorder: Recorder, inner: httpx.BaseTransport | None = None) -> None:
        self.recorder = recorder
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = _invoke(self.recorder, request)
        if started is None:
            return self.inner.handle_request(request)
        f, op, fields = started
        try:
            response = self.inner.handle_request(request)
            response.read()
        except httpx.HTTPError as exc:
            self.recorder.record("unknown", f, op, **fields, error=type(exc).__name__)
            raise
        _complete(self.recorder, f, op, fields, response)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncRecordingTransport(httpx.AsyncBaseTransport):
    """The async twin of ``RecordingTransport``, for ``AsyncVolcanoClient``."""

    def __init__(self, recorder: Recorder, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.recorder = recorder
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = _invoke(self.recorder, request)
        if started is None:
            return await self.inner.handle_async_request(request)
        f, op, fields = started
        try:
            response = await self.inner.handle_async_request(request)
            await response.aread()
        except httpx.HTTPError as exc:
            self.recorder.record("unknown", f, op, **fields, error=type(exc).__name__)
            raise
        _complete(self.recorder, f, op, fields, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def write_events(path: Path, events: Iterable[Event]) -> None:
    with path.open("w") as out:
        for event in events:
            out.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")


def _read(path: Path) -> Iterator[Event]:
    with path.open() as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue  # a line cut by a crash mid-write is not an event


def load(paths: Iterable[Path | str]) -> list[Event]:
    """Merges per-process histories into one, ordered by the shared monotonic clock."""
    events: list[Event] = []
    for path in paths:
        events.extend(_read(Path(path)))
    # Stable: events of one process with equal times keep their file order.
    events.sort(key=lambda e: e["t"])
    return events


def history_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.jsonl") if p.is_file() and os.path.getsize(p))
