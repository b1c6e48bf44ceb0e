"""POST batches to the collector over one keep-alive HTTP(S) connection."""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import ssl
import urllib.parse
from typing import Any

from agent import __version__
from agent.wire import INGEST_PATH

log = logging.getLogger(__name__)

PERMANENT = (401, 403, 413, 422)  # this batch will never be accepted: drop it, don't spool it
GZIP_MIN_BYTES = 16 * 1024


class Unavailable(Exception):
    """Connection error, timeout, 5xx or other transient answer: spool and retry later.

    ``refused``: nothing listens on the collector's port (it is down or restarting), which is
    cheap to find out, so the agent asks again soon."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def _unavailable(exc: Exception) -> Unavailable:
    refused = isinstance(exc, ConnectionRefusedError)
    return Unavailable(str(exc) or type(exc).__name__, refused=refused)


class Rejected(Exception):
    """The collector refused this batch for good (401/403/413/422)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class Transport:
    def __init__(
        self,
        collector_url: str,
        token: str,
        *,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        url = urllib.parse.urlsplit(collector_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"collector URL must be http(s)://host[:port]: {collector_url!r}")
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port
        self._path = url.path.rstrip("/") + INGEST_PATH
        self._token = token
        self._timeout = timeout
        self._ssl = ssl_context
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._ssl
                )
            else:
                self._conn = http.client.HTTPConnection(
                    self._host, self._port, timeout=self._timeout
                )
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def post(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Send one batch; the collector's JSON answer, or Unavailable / Rejected."""
        body = json.dumps(batch, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self._token}",
            "User-Agent": f"freezewatch-agent/{__version__}",
        }
        if len(body) >= GZIP_MIN_BYTES:
            body = gzip.compress(body, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        reused = self._conn is not None
        try:
            status, text = self._request(body, headers)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if not reused:
                raise _unavailable(exc) from exc
            try:  # a kept-alive connection the server had closed: one fresh attempt
                status, text = self._request(body, headers)
            except (OSError, http.client.HTTPException) as exc2:
                self.close()
                raise _unavailable(exc2) from exc2
        if status == 200:
            try:
                answer = json.loads(text)
            except ValueError:
                answer = {}
            return answer if isinstance(answer, dict) else {}
        if status in PERMANENT:
            raise Rejected(status, text)
        raise Unavailable(f"HTTP {status}: {text[:200]}")

    def _request(self, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        conn = self._connect()
        conn.request("POST", self._path, body=body, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        if resp.will_close:
            self.close()
        return resp.status, text
