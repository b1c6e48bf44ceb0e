"""A loopback HTTP server that records every POST (JSON or form body) and answers scripted
statuses: the far end of Apprise's ``json://`` and ``form://`` services in tests.

    with http_receiver(statuses=[500]) as rec:
        url = f"json://127.0.0.1:{rec.port}/notify"
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


@dataclass
class Request:
    path: str
    status: int  # what the receiver answered
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class HttpReceiver:
    statuses: list[int] = field(default_factory=list)  # answers to give, then 200
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> int:
        kind = headers.get("content-type", "")
        if kind.startswith("application/json"):
            body = json.loads(raw)
        else:
            body = {k: v[0] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        with self.lock:
            status = self.statuses.pop(0) if self.statuses else 200
            self.requests.append(Request(path=path, status=status, headers=headers, body=body))
        return status

    @property
    def accepted(self) -> list[Request]:
        """The requests answered 2xx: what the service would have shown someone."""
        return [r for r in self.requests if 200 <= r.status < 300]


@contextmanager
def serve_posts(handle: Callable[[str, dict[str, str], bytes], int]) -> Iterator[int]:
    """A loopback server answering each POST with ``handle(path, headers, body)``'s status;
    yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = handle(self.path, headers, raw)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def http_receiver(statuses: list[int] | None = None) -> Iterator[HttpReceiver]:
    rec = HttpReceiver(statuses=list(statuses or []))
    with serve_posts(rec.handle) as port:
        rec.port = port
        yield rec
