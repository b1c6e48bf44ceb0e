"""A Docker Engine API stand-in on a unix socket, serving recorded real-format responses.

Routes: ``/containers/json`` (label and name filters), ``/containers/{id}/json``,
``/containers/{id}/stats``, ``/containers/{id}/logs`` (chunked; multiplexed frames unless the
container has a TTY). Tests push log output with ``log()`` and end a stream with ``end_logs()``.

``POST /containers/{id}/stop?t=N`` and ``POST /containers/{id}/kill?signal=S`` answer as the
Engine does: stop sends the stop signal, waits up to ``t`` s for the container to exit, then
kills it, and only then answers 204 (304 when it was not running); kill answers 204 (409 when
not running); an unknown container is 404. ``behave(name, stop=...)`` makes the container
``"exit"`` on the stop signal (default), ``"ignore"`` it (the Engine kills it after ``t``), or
makes the daemon ``"hang"`` on the stop call (a daemon stuck behind a host in trouble; released
by ``close()``); ``kill="hang"`` does the same to kill calls. Each call is recorded in ``calls``
as ``(wall-clock time it arrived, "stop"|"kill", container name, query, status)``.
"""

from __future__ import annotations

import copy
import http.server
import json
import queue
import socketserver
import struct
import threading
import time
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

    def do_POST(self) -> None:
        standin = self.server.standin
        arrived = time.time()  # wall clock: comparable with another process's (bench/guard.py)
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        container = standin.find(parts[1]) if len(parts) == 3 else None
        if container is None or parts[2] not in ("stop", "kill"):
            return self._json({"message": f"No such container: {parts[1:2]}"}, 404)
        op, name = parts[2], container["inspect"]["Name"].lstrip("/")
        standin.calls.append((arrived, op, name, query, None))
        index = len(standin.calls) - 1
        status = standin.act(container, op, query)
        standin.calls[index] = (arrived, op, name, query, status)
        if status == 409:
            cid = container["inspect"]["Id"]
            return self._json({"message": f"Container {cid} is not running"}, 409)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

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
        self.calls: list[tuple[float, str, str, dict[str, str], int | None]] = []
        self.released = threading.Event()  # set by close(): hung calls return
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
                "behave": {"stop": "exit", "kill": "answer"},
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

    def behave(self, name: str, *, stop: str = "exit", kill: str = "answer") -> None:
        container = self.find(name)
        assert container is not None and stop in ("exit", "ignore", "hang")
        container["behave"] = {"stop": stop, "kill": kill}

    def set_running(self, name: str, running: bool = True, pid: int | None = None) -> None:
        container = self.find(name)
        assert container is not None
        state = container["inspect"]["State"]
        state.update(Running=running, Status="running" if running else "exited")
        state.update(ExitCode=0, Pid=(pid if pid is not None else state["Pid"]) if running else 0)
        container["item"]["State"] = state["Status"]

    def act(self, container: dict[str, Any], op: str, query: dict[str, str]) -> int:
        """What the Engine does for a stop or kill call, and the status it answers."""
        state = container["inspect"]["State"]
        behave = container["behave"]
        if (op == "stop" and behave["stop"] == "hang") or (
            op == "kill" and behave["kill"] == "hang"
        ):
            self.released.wait()
            return 500
        if not state["Running"]:
            return 304 if op == "stop" else 409
        exit_code = 137 if op == "kill" else 0
        if op == "stop" and behave["stop"] == "ignore":
            self.released.wait(float(query.get("t", "10")))  # then the Engine's SIGKILL
            exit_code = 137
        self.set_running(container["inspect"]["Name"].lstrip("/"), False)
        state["ExitCode"] = exit_code
        return 204

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
        self.released.set()
        for container in self.containers.values():
            container["logs"].put(None)
        self._server.shutdown()
        self._server.server_close()
