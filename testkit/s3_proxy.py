"""A fault-injecting HTTP proxy on loopback in front of the real S3 server (SeaweedFS), for tests.

Requests pass through unchanged (the Host header too, so SigV4 signatures still verify) and
responses come back with their headers: a HEAD keeps its Content-Length (ClickHouse reads an
object whose HEAD says 0 bytes as 0 rows, silently). GETs are numbered in arrival order; with
`slowdown_every=2, reset_every=6` every 2nd GET is answered 503 SlowDown and every 6th is reset
(RST) after its headers and half its body, as a connection dropped mid-transfer is: a client
that retries only whole requests sees it while reading the body. Counters say what was done.

GETs are numbered in arrival order, whatever they ask for (the issue's storm: 94 503s and 46
resets of 281 GETs). With `cut_once=True` a reset cuts the body only the first time it falls on a
given GET (method, path, Range); a later reset of the same GET drops the connection before any
answer, which every client retries by itself. Without it, a day's retries, each sending the same
GETs alone during the ramp-up, met the cut at the same footer again and again (measured: 5 tries
of one day failed at the same part-00000.parquet), a resonance of the counter, not a storm.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

LOOPBACK = "127.0.0.1"
UPSTREAM_TIMEOUT_SECONDS = 30.0
# Headers hop-by-hop or recomputed here.
_DROPPED = {"transfer-encoding", "connection", "keep-alive"}
SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>"
)


@dataclass
class FaultPlan:
    """Which GETs fail: every `slowdown_every`-th answered 503, every `reset_every`-th reset
    (0: never); a reset wins when both apply."""

    slowdown_every: int = 0
    reset_every: int = 0
    cut_once: bool = False
    gets: int = 0
    cuts: int = 0
    slowdowns: int = 0
    resets: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _seen: set[str] = field(default_factory=set, repr=False)

    def next_get(self, identity: str) -> str:
        with self._lock:
            self.gets += 1
            n = self.gets
            if self.reset_every and n % self.reset_every == 0:
                self.resets += 1
                if self.cut_once and identity in self._seen:
                    return "drop"
                self._seen.add(identity)
                self.cuts += 1
                return "reset"
            if self.slowdown_every and n % self.slowdown_every == 0:
                self.slowdowns += 1
                return "slowdown"
            return "pass"

    def calm(self) -> None:
        """No more faults (the storm is over)."""
        with self._lock:
            self.slowdown_every = self.reset_every = 0


@dataclass
class S3Proxy:
    endpoint_url: str
    plan: FaultPlan


def _handler(upstream: tuple[str, int], plan: FaultPlan) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _forward(self) -> tuple[int, str, list[tuple[str, str]], bytes]:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            connection = http.client.HTTPConnection(*upstream, timeout=UPSTREAM_TIMEOUT_SECONDS)
            try:
                connection.putrequest(
                    self.command, self.path, skip_host=True, skip_accept_encoding=True
                )
                for name, value in self.headers.items():
                    if name.lower() not in _DROPPED:
                        connection.putheader(name, value)
                connection.endheaders(body)
                response = connection.getresponse()
                data = response.read()
                return response.status, response.reason, response.getheaders(), data
            finally:
                connection.close()

        def _reply(self, status: int, reason: str, headers: list, data: bytes, cut: bool) -> None:
            self.send_response_only(status, reason)
            for name, value in headers:
                if name.lower() not in _DROPPED and name.lower() != "content-length":
                    self.send_header(name, value)
            # A HEAD passes its object's size through; other answers carry their own body.
            length = dict((k.lower(), v) for k, v in headers).get("content-length")
            if self.command == "HEAD" and length is not None:
                self.send_header("Content-Length", length)
            else:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if cut:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self._reset()
                return
            self.wfile.write(data)

        def _reset(self) -> None:
            # SO_LINGER 0: close() sends an RST, the peer sees "connection reset by peer".
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.close()

        def _handle(self) -> None:
            with plan._lock:
                plan.requests += 1
            identity = f"{self.path} {self.headers.get('Range', '')}"
            fault = plan.next_get(identity) if self.command == "GET" else "pass"
            if fault == "slowdown":
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self._reply(
                    503,
                    "Slow Down",
                    [("Content-Type", "application/xml")],
                    SLOWDOWN_BODY,
                    cut=False,
                )
                return
            if fault == "drop":
                self._reset()
                return
            status, reason, headers, data = self._forward()
            if fault == "reset" and not data:
                self._reset()  # nothing to cut: the connection drops before the answer
                return
            self._reply(status, reason, headers, data, cut=fault == "reset")

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        def finish(self) -> None:
            with contextlib.suppress(OSError):
                super().finish()

    return Handler


@contextlib.contextmanager
def s3_proxy(upstream_url: str, plan: FaultPlan) -> Iterator[S3Proxy]:
    """The proxy on a free loopback port, in front of `upstream_url`, until the block ends."""
    parsed = urlparse(upstream_url)
    assert parsed.hostname == LOOPBACK, "tests proxy a loopback server only"
    server = ThreadingHTTPServer((LOOPBACK, 0), _handler((parsed.hostname, parsed.port), plan))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield S3Proxy(f"http://{LOOPBACK}:{server.server_address[1]}", plan)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
