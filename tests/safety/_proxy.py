"""An HTTP-aware chaos proxy on loopback, in front of one or more server replicas.

It reads each HTTP/1.1 request whole (headers and ``Content-Length`` body), then, by chance:

- ``drop``: closes the client's connection without forwarding (the request never ran);
- ``delay``: waits before forwarding (the client may time out and retry meanwhile, so the
  delayed original can arrive after its own retry);
- ``duplicate``: also sends the same bytes on a second connection, to any replica;
- ``cut``: forwards, reads the whole answer, then closes the client's connection without it
  (the request ran, the client cannot know: the ambiguous outcome);
- otherwise passes the request and its answer through.

Connections go to the replicas round-robin, skipping one that refuses, so clients are spread
across replicas and a killed replica's clients move to the others. ``tests/server/_proxy.py``
cuts whole connections at the TCP level; this one decides per request.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from collections import Counter

__all__ = ["ChaosProxy", "Odds"]

MAX_MESSAGE = 1 << 20
UPSTREAM_TIMEOUT = 15.0


class Odds:
    """The chances of each fault per request; all zero passes everything through."""

    def __init__(
        self,
        drop: float = 0.0,
        delay: float = 0.0,
        duplicate: float = 0.0,
        cut: float = 0.0,
        max_delay: float = 1.0,
        forge: float = 0.0,
    ) -> None:
        self.drop = drop
        self.delay = delay
        self.duplicate = duplicate
        self.cut = cut
        self.max_delay = max_delay
        # Sabotage, for testing the checker end to end: turn a refused acquisition into a
        # forged grant that reuses the current holder's fence (a broken service).
        self.forge = forge


def _read_message(sock: socket.socket, buffer: bytearray) -> bytes | None:
    """One whole HTTP message from ``sock`` (leftovers stay in ``buffer``); None at EOF."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
        if len(buffer) > MAX_MESSAGE:
            raise OSError("message too large")
    head_end = buffer.index(b"\r\n\r\n") + 4
    length = 0
    for line in bytes(buffer[:head_end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        elif name.strip().lower() == b"transfer-encoding":
            raise OSError("chunked messages are not supported by the chaos proxy")
    while len(buffer) < head_end + length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    message = bytes(buffer[: head_end + length])
    del buffer[: head_end + length]
    return message


def _close(*socks: socket.socket | None) -> None:
    for s in socks:
        if s is None:
            continue
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()


class ChaosProxy:
    def __init__(self, upstreams: list[tuple[str, int]], seed: int = 0) -> None:
        self.upstreams = list(upstreams)
        self.base_odds = Odds()  # what the proxy goes back to after a fault window
        self.odds = self.base_odds
        self.port = 0
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._next = 0
        self._fences: dict[str, int] = {}  # key -> the last fence granted through us
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ChaosProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        _close(*sockets)

    def _random(self) -> float:
        with self._rng_lock:
            return self._rng.random()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.add(s)

    def _untrack(self, *socks: socket.socket | None) -> None:
        with self._lock:
            for s in socks:
                self._sockets.discard(s)  # type: ignore[arg-type]
        _close(*socks)

    def _connect(self) -> socket.socket | None:
        """A connection to the next replica that accepts one, round-robin."""
        for _ in range(len(self.upstreams)):
            with self._lock:
                target = self.upstreams[self._next % len(self.upstreams)]
                self._next += 1
            try:
                s = socket.create_connection(target, timeout=2)
            except OSError:
                continue
            s.settimeout(UPSTREAM_TIMEOUT)
            self._track(s)
            return s
        return None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _duplicate(self, request: bytes) -> None:
        s = self._connect()
        if s is None:
            return
        try:
            s.sendall(request)
            _read_message(s, bytearray())
        except OSError:
            pass
        finally:
            self._untrack(s)

    def _sabotage(self, request: bytes, answer: bytes, odds: Odds) -> bytes:
        head, _, body = request.partition(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        path = line.split(" ")[1] if line.count(" ") >= 2 else ""
        if not path.endswith("/acquire"):
            return answer
        key = path.rsplit("/", 2)[-2]
        status = answer.split(b" ", 2)[1]
        reply = json.loads(answer.partition(b"\r\n\r\n")[2] or b"null")
        if status == b"200" and isinstance(reply, dict):
            self._fences[key] = reply.get("fencing_token")
            return answer
        error = reply.get("error", {}) if isinstance(reply, dict) else {}
        fence = self._fences.get(key)
        if status != b"409" or error.get("code") != "lock_held" or fence is None:
            return answer
        if self._random() >= odds.forge:
            return answer
        self.counts["forge"] += 1
        forged = json.dumps(
            {
                "key": key,
                "token": json.loads(body)["token"],
                "fencing_token": fence,
                "expires_at": error["expires_at"],
            }
        ).encode()
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(forged)}\r\n\r\n".encode()
            + forged
        )

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        inbound, outbound = bytearray(), bytearray()
        try:
            while True:
                request = _read_message(client, inbound)
                if request is None:
                    return
                odds = self.odds
                if self._random() < odds.drop:
                    self.counts["drop"] += 1
                    return
                if self._random() < odds.delay:
                    self.counts["delay"] += 1
                    time.sleep(self._random() * odds.max_delay)
                if self._random() < odds.duplicate:
                    self.counts["duplicate"] += 1
                    threading.Thread(target=self._duplicate, args=(request,), daemon=True).start()
                if upstream is None:
                    upstream = self._connect()
                    if upstream is None:
                        return
                upstream.sendall(request)
                answer = _read_message(upstream, outbound)
                if answer is None:
                    return  # the replica died mid-request: the client sees a cut connection
                answer = self._sabotage(request, answer, odds)
                if self._random() < odds.cut:
                    self.counts["cut"] += 1
                    return
                self.counts["pass"] += 1
                client.sendall(answer)
        except OSError:
            return
        finally:
            self._untrack(client, upstream)
