"""POST batches to the collector over one kept-alive HTTP(S) connection.

A POST is split in two steps, ``send`` then ``receive``, so the shipper can build its next
batch while the collector stores this one (``post`` is both). A body is gzipped only where that
pays: at least ``GZIP_MIN_BYTES``, at level 1 (most of the gain for a third of level 5's
CPU), and never to a collector on this very host (loopback carries bytes for free, while
compressing and inflating them costs both sides CPU).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import zlib
from collections.abc import Callable
from typing import Any

from agent import __version__
from agent.http11 import Connection
from agent.wire import INGEST_PATH

log = logging.getLogger(__name__)

PERMANENT = (400, 401, 403, 413, 422)  # this batch will never be accepted: drop it, don't spool it
GZIP_MIN_BYTES = 16 * 1024
GZIP_LEVEL = 1
# A big batch gets longer than ``timeout``: this many bytes a second is the least a busy
# collector is expected to take in and store. Without it, a burst's 8 MiB batch could time
# out on every retry (and be retried, the same, for ever).
SLOWEST_BYTES_PER_S = 1 << 20


class Unavailable(Exception):
    """Connection error, timeout, 5xx or other transient answer: spool and retry later.

    ``status``: the HTTP status of an answer (the collector is up, this batch failed).
    ``refused``: nothing listens on the collector's port (it is down or restarting), which is
    cheap to find out, so the agent asks again soon."""

    def __init__(self, message: str, *, refused: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.refused = refused
        self.status = status  # the collector's HTTP status when it answered


def _unavailable(exc: Exception) -> Unavailable:
    refused = isinstance(exc, ConnectionRefusedError)
    return Unavailable(str(exc) or type(exc).__name__, refused=refused)


class Rejected(Exception):
    """The collector refused this batch for good (400/401/403/413/422)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


def is_loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host in ("::1", "0:0:0:0:0:0:0:1")


def gzip_bytes(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    """A gzip member (what ``Content-Encoding: gzip`` means) without importing ``gzip``."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


class Transport:
    """``compress``: gzip large bodies; None (default) means yes unless the collector is on
    a loopback address."""

    def __init__(
        self,
        collector_url: str,
        token: str,
        *,
        timeout: float = 5.0,
        ssl_context: Any = None,
        compress: bool | None = None,
        wait_readable: Callable[[int, float], bool] | None = None,
        wait_writable: Callable[[int, float], bool] | None = None,
    ) -> None:
        url = urllib.parse.urlsplit(collector_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"collector URL must be http(s)://host[:port]: {collector_url!r}")
        self._path = url.path.rstrip("/") + INGEST_PATH
        self._timeout = timeout
        self._conn = Connection(
            url.hostname,
            url.port,
            timeout=timeout,
            https=url.scheme == "https",
            ssl_context=ssl_context,
            wait_writable=wait_writable,
        )
        self._headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "User-Agent": f"freezewatch-agent/{__version__}",
        }
        self.compress = not is_loopback(url.hostname) if compress is None else compress
        # How to wait for an answer (and, ``wait_writable``, for a connection to be made):
        # ``Outbox.wait_readable`` reads /dev/kmsg meanwhile.
        self._wait_readable = wait_readable
        # The POST sent and not yet answered: (body, headers, sent on a reused connection,
        # the error sending it raised).
        self._pending: tuple[bytes, dict[str, str], bool, Exception | None] | None = None

    def close(self) -> None:
        self._conn.close()
        self._pending = None

    def post(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Send one batch; the collector's JSON answer, or Unavailable / Rejected."""
        self.send(batch)
        return self.receive()

    def send(self, batch: dict[str, Any], ahead: Encoded | None = None) -> None:
        """Send one batch without waiting for the answer (``receive`` reads it); ``ahead``:
        its record lists already encoded."""
        body = encode(batch, ahead)
        headers = self._headers
        if self.compress and len(body) >= GZIP_MIN_BYTES:
            body = gzip_bytes(body)
            headers = {**headers, "Content-Encoding": "gzip"}
        # whole seconds: the timeout changes (a syscall) only for a big body
        self._conn.settimeout(self._timeout + len(body) // SLOWEST_BYTES_PER_S)
        reused = self._conn.sock is not None
        error = None
        try:
            self._conn.request("POST", self._path, body, headers)
        except OSError as exc:  # a kept-alive connection the server had closed shows here, or
            error = exc  # in receive: either way it is retried once there
        self._pending = (body, headers, reused, error)

    def receive(self) -> dict[str, Any]:
        """The answer to the batch ``send`` sent: the collector's JSON, or Unavailable /
        Rejected."""
        assert self._pending is not None, "receive() without send()"
        body, headers, reused, error = self._pending
        self._pending = None
        try:
            if error is not None:
                raise error
            self._await_answer()
            status, text = self._answer()
        except OSError as exc:
            self._conn.close()
            if not reused:
                raise _unavailable(exc) from exc
            try:  # a kept-alive connection the server had closed: one fresh attempt
                self._conn.request("POST", self._path, body, headers)
                self._await_answer()
                status, text = self._answer()
            except OSError as exc2:
                self._conn.close()
                raise _unavailable(exc2) from exc2
        if status == 200:
            try:
                answer = json.loads(text)
            except ValueError:
                answer = {}
            return answer if isinstance(answer, dict) else {}
        if status in PERMANENT:
            raise Rejected(status, text)
        raise Unavailable(f"HTTP {status}: {text[:200]}", status=status)

    def _await_answer(self) -> None:
        sock, wait = self._conn.sock, self._wait_readable
        if wait is None or sock is None:
            return
        if not wait(sock.fileno(), self._conn.timeout or self._timeout):
            raise TimeoutError("timed out waiting for the collector's answer")

    def _answer(self) -> tuple[int, str]:
        response = self._conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        return response.status, text


STREAM_KEYS = ("samples", "lines", "events")
SLICE = 1000  # records encoded per json.dumps call: the GIL is free between calls
AHEAD_MIN = 64  # records in a list worth encoding while the batch before is in flight
Encoded = dict[str, tuple[list[dict[str, Any]], bytes]]  # stream -> (its records, their JSON)


def encode_records(
    records: list[dict[str, Any]], between: Callable[[], None] | None = None
) -> bytes:
    """A JSON array of ``records``, encoded a slice at a time: one call on a 20,000-record
    list would take tens of milliseconds, while /dev/kmsg waits to be read (by a thread that
    wants the GIL, or by ``between``, called after each slice)."""
    if len(records) <= SLICE:
        return json.dumps(records, separators=(",", ":")).encode()
    parts = []
    for i in range(0, len(records), SLICE):
        parts.append(json.dumps(records[i : i + SLICE], separators=(",", ":"))[1:-1])
        if between is not None:
            between()
    return ("[" + ",".join(parts) + "]").encode()


def encode_streams(batch: dict[str, Any], between: Callable[[], None] | None = None) -> Encoded:
    """The record lists of ``batch`` encoded ahead of sending (see ``encode``): those over
    ``AHEAD_MIN`` records only, the small ones cost less inside ``encode``'s one call."""
    return {
        key: (batch[key], encode_records(batch[key], between))
        for key in STREAM_KEYS
        if len(batch.get(key, ())) > AHEAD_MIN
    }


def encode(batch: dict[str, Any], ahead: Encoded | None = None) -> bytes:
    """The batch as compact JSON; a record list found in ``ahead`` (the very same list
    object) is not encoded again. Nothing ahead (a heartbeat, a line or two): one call; but a
    list over ``SLICE`` (a spool replay, a catch-up: sent with nothing ahead) still goes a
    slice at a time."""
    done = {k: d for k, (records, d) in (ahead or {}).items() if batch.get(k) is records}
    for key in STREAM_KEYS:
        if key not in done and len(batch.get(key, ())) > SLICE:
            done[key] = encode_records(batch[key])
    if not done:
        return json.dumps(batch, separators=(",", ":")).encode()
    rest = {k: v for k, v in batch.items() if k not in done}
    parts = [json.dumps(rest, separators=(",", ":"))[1:-1].encode()] if rest else []
    parts += [b'"' + key.encode() + b'":' + data for key, data in done.items()]
    return b"{" + b",".join(parts) + b"}"
