"""A Docker Engine API stand-in on a unix socket, serving recorded real-format responses.

Routes: ``/containers/json`` (label and name filters), ``/containers/{id}/json``,
``/containers/{id}/stats``, ``/containers/{id}/logs`` (chunked; multiplexed frames unless the
container has a TTY). Tests push log output with ``log()`` and end a stream with ``end_logs()``.
"""

from __future__ import annotations

import copy
import http.server
import json
import queue
import socketserver
import struct
import threading
import urllib.parse
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parents[1] / "fixtures" / "docker"


def frame(stream: int, payload: bytes) -> bytes:
    """One multiplexed-stream frame: [stream, 0, 0, 0, size (big-endian uint32)] + payload."""
    return struct.pack(">BxxxI", stream, len(payload)) + payload


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    standin: DockerStandin


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def address_string(self) -> str:
        return "docker.sock"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, value: Any, status: int = 200) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        standin = self.server.standin
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        standin.requests.append(self.path)
        parts = url.path.strip("/").split("/")
        if parts == ["containers", "json"]:
            return self._json(standin.list(json.loads(query.get("filters", "{}"))))
        container = standin.find(parts[1]) if len(parts) == 3 else None
        if container is None:
            return self._json({"message": f"No such container: {parts[-2]}"}, 404)
        if parts[2] == "json":
            return self._json(container["inspect"])
        if parts[2] == "stats":
            return self._json(container["stats"])
        if parts[2] == "logs":
            return self._logs(container, query)
        return self._json({"message": "page not found"}, 404)

    def _logs(self, container: dict[str, Any], query: dict[str, str]) -> None:
        standin = self.server.standin
        standin.log_queries.append((container["inspect"]["Name"].lstrip("/"), query))
        tty = container["inspect"]["Config"]["Tty"]
        self.send_response(200)
        content = (
            "application/vnd.docker.raw-stream"
            if tty
            else "application/vnd.docker.multiplexed-stream"
        )
        self.send_header("Content-Type", content)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        logs: queue.Queue[tuple[int, bytes] | None] = container["logs"]
        while (item := logs.get()) is not None:
            data = item[1] if tty else frame(*item)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


class DockerStandin:
    """Serves the recorded responses on ``socket_path`` until ``close()``."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.requests: list[str] = []
        self.log_queries: list[tuple[str, dict[str, str]]] = []
        self.containers: dict[str, dict[str, Any]] = {}
        listing = json.loads((FIXTURES / "containers.json").read_text())
        inspect = json.loads((FIXTURES / "inspect.json").read_text())
        stats = json.loads((FIXTURES / "stats.json").read_text())
        for item in listing:
            detail = copy.deepcopy(inspect)
            detail["Id"], detail["Name"] = item["Id"], item["Names"][0]
            running = item["State"] == "running"
            detail["State"].update(
                Status=item["State"], Running=running, ExitCode=0 if running else 137
            )
            detail["State"]["OOMKilled"] = not running
            self.containers[item["Id"]] = {
                "item": item,
                "inspect": detail,
                "stats": stats,
                "logs": queue.Queue(),
            }
        self._server = _Server(socket_path, _Handler)
        self._server.standin = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def find(self, ref: str) -> dict[str, Any] | None:
        for cid, container in self.containers.items():
            if cid.startswith(ref) or container["inspect"]["Name"] == f"/{ref}":
                return container
        return None

    def list(self, filters: dict[str, list[str]]) -> list[dict[str, Any]]:
        out = []
        for container in self.containers.values():
            item = container["item"]
            labels = [f"{k}={v}" for k, v in item["Labels"].items()] + list(item["Labels"])
            if any(label not in labels for label in filters.get("label", [])):
                continue
            names = filters.get("name", [])
            # Like the real daemon: a name filter is a substring/regex match.
            if names and not any(n in item["Names"][0] for n in names):
                continue
            out.append(item)
        return out

    def log(self, name: str, stream: int, payload: bytes) -> None:
        container = self.find(name)
        assert container is not None
        container["logs"].put((stream, payload))

    def end_logs(self, name: str) -> None:
        """The container stopped: its log stream ends; a fresh queue serves the next attach."""
        container = self.find(name)
        assert container is not None
        old, container["logs"] = container["logs"], queue.Queue()
        old.put(None)

    def close(self) -> None:
        for container in self.containers.values():
            container["logs"].put(None)
        self._server.shutdown()
        self._server.server_close()
