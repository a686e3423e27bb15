"""An HTTP proxy on loopback in front of the S3 server, for tests of a store that fails: it
forwards each request to the server and its answer back, unless told to answer 503 (S3's
"SlowDown") instead for the next N requests, to flip bytes in the body of the next N range
reads (damage in transit), or to stall (hold requests without answering until released). Real
HTTP both ways: the core's client talks to it as to any S3 endpoint."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class Proxy:
    """The proxy's endpoint and its switches: `fail(n)` answers 503 to the next `n` requests
    (-1: every request until `fail(0)`; with `only`, the requests whose method and path start
    so, "GET /bucket/run/"), `flip(n)` flips a byte in every 256 of the body of the next `n`
    answers to range reads, so every chunk in it fails its checksum (-1: every one until
    `flip(0)`), `stall()` holds requests until `release()`. `requests`, `refused` and `flipped`
    count what it saw, what it answered 503 and the bodies it flipped."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.endpoint = ""
        self.requests = 0
        self.refused = 0
        self.flipped = 0
        self._failing = 0
        self._only = ""
        self._flipping = 0
        self._go = threading.Event()
        self._go.set()
        self._lock = threading.Lock()

    def fail(self, n: int, only: str = "") -> None:
        with self._lock:
            self._failing, self._only = n, only

    def flip(self, n: int) -> None:
        with self._lock:
            self._flipping = n

    def _flips(self, payload: bytes) -> bytes:
        with self._lock:
            if self._flipping == 0 or not payload:
                return payload
            if self._flipping > 0:
                self._flipping -= 1
            self.flipped += 1
        body = bytearray(payload)
        for at in range(len(body) // 2 % 256, len(body), 256):
            body[at] ^= 0x20
        return bytes(body)

    def stall(self) -> None:
        self._go.clear()

    def release(self) -> None:
        self._go.set()

    def _refuses(self, request: str) -> bool:
        with self._lock:
            self.requests += 1
            if self._failing == 0 or not request.startswith(self._only):
                return False
            if self._failing > 0:
                self._failing -= 1
            self.refused += 1
            return True

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client expects of S3

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                # A stalled proxy holds the request; the client's timeout is what ends it.
                while not proxy._go.wait(0.05):
                    pass
                if proxy._refuses(f"{self.command} {self.path}"):
                    self._answer(503, {"Content-Type": "application/xml"}, SLOW_DOWN)
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    got = conn.getresponse()
                    payload = got.read()
                    if self.command == "GET" and "range" in {k.lower() for k in self.headers}:
                        payload = proxy._flips(payload)
                    keep = {k: v for k, v in got.getheaders() if k.lower() not in ("transfer-encoding", "connection")}
                    self._answer(got.status, keep, payload)
                finally:
                    conn.close()

            def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                head = self.command == "HEAD"  # its Content-Length is the object's: kept
                for k, v in headers.items():
                    if head or k.lower() != "content-length":
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if not head:
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        return Handler


@contextmanager
def s3_proxy(target: str) -> Iterator[Proxy]:
    """A proxy on a free loopback port forwarding to `target` (the S3 server's endpoint)."""
    proxy = Proxy(target)
    server = ThreadingHTTPServer(("127.0.0.1", 0), proxy.handler())
    server.daemon_threads = True
    proxy.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="s3-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.release()
        server.shutdown()
        server.server_close()
