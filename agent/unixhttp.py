"""HTTP over a unix socket (the Docker Engine API)."""

from __future__ import annotations

import json
from typing import Any

from agent.http11 import Connection, RemoteDisconnected


class UnixHTTPConnection(Connection):
    """An HTTP/1.1 connection whose transport is an AF_UNIX stream socket."""

    def __init__(self, socket_path: str, timeout: float | None = 0.5) -> None:
        # "localhost" is the Host header only; no TCP involved
        super().__init__("localhost", timeout=timeout, unix_path=socket_path)
        self.socket_path = socket_path


class ApiError(Exception):
    """The API answered, but not with 2xx."""


class UnixJsonClient:
    """GET JSON over one kept-alive unix-socket connection, re-made after any failure."""

    def __init__(self, socket_path: str, timeout: float = 0.5) -> None:
        self.socket_path = socket_path
        self._timeout = timeout
        self._conn: UnixHTTPConnection | None = None

    def get_json(self, path: str) -> Any:
        for attempt in (0, 1):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = UnixHTTPConnection(self.socket_path, self._timeout)
            try:
                self._conn.request("GET", path)
                response = self._conn.getresponse()
                body = response.read()
            except (RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if not reused or attempt:
                    raise
                continue  # a stale kept-alive connection: retry once on a fresh one
            except Exception:
                self.close()
                raise
            if not 200 <= response.status < 300:
                raise ApiError(f"GET {path}: HTTP {response.status}: {body[:200]!r}")
            return json.loads(body)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
