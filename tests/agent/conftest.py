"""A tiny stdlib collector speaking the wire contract, for agent tests."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.wire import INGEST_PATH, STREAMS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOKEN = "test-token"


class FakeCollector:
    """Stores batches like the real collector: unique (boot, stream, seq) and (boot, kseq)."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []  # every accepted POST, in arrival order
        self.records: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.kseqs: dict[str, list[int]] = {}  # boot -> kseqs stored, in arrival order
        self.duplicate_kseqs = 0
        self.status = 200  # set to 500/422/... to make it answer that
        # A status for the batches it must fail (None: stored), as a record no database holds.
        self.refuse: Callable[[dict[str, Any]], int | None] | None = None
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.connections: set[socket.socket] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                collector.connections.add(self.connection)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != INGEST_PATH:
                    return self._answer(404, {"detail": "not found"})
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._answer(401, {"detail": "bad token"})
                if collector.status != 200:
                    return self._answer(collector.status, {"detail": "configured failure"})
                status = collector.refuse(json.loads(body)) if collector.refuse else None
                if status is not None:
                    return self._answer(status, {"detail": "this batch fails"})
                self._answer(200, collector.ingest(json.loads(body)))

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            for conn in list(self.connections):  # a real stop also ends keep-alive connections
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self.connections.clear()
            self.server = None

    def ingest(self, batch: dict[str, Any]) -> dict[str, Any]:
        boot = batch["boot_id"]
        stored = dict.fromkeys(STREAMS, 0)
        dups = dict.fromkeys(STREAMS, 0)
        with self.lock:
            self.batches.append(batch)
            for stream in STREAMS:
                for record in batch[stream]:
                    key = (boot, stream, record["seq"])
                    kseq = record.get("kseq")
                    if key in self.records or (
                        kseq is not None and kseq in self.kseqs.get(boot, [])
                    ):
                        dups[stream] += 1
                        if kseq is not None:
                            self.duplicate_kseqs += 1
                        continue
                    self.records[key] = record
                    stored[stream] += 1
                    if kseq is not None:
                        self.kseqs.setdefault(boot, []).append(kseq)
            have = self.kseqs.get(boot)
            resume = max(have) if have else None
        return {"stored": stored, "duplicates": dups, "resume": {"kseq": resume}}

    def stream(self, name: str) -> list[dict[str, Any]]:
        """Stored records of one stream in arrival order."""
        with self.lock:
            return [
                r
                for b in self.batches
                for r in b[name]
                if self.records.get((b["boot_id"], name, r["seq"])) is r
            ]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.stream("events") if e["kind"] == kind]


def wait_for(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll until ``condition()`` is truthy; the timeout only guards against a hung test."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    c = FakeCollector()
    c.start()
    yield c
    c.stop()
