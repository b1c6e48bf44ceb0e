"""Live container logs from the Docker Engine API, shipped as ``source="vllm"`` lines."""

from __future__ import annotations

import calendar
import contextlib
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from agent.sources.docker import DEFAULT_LABEL, DOCKER_SOCKET, list_containers
from agent.sources.lines import level_priority, make_line
from agent.unixhttp import UnixHTTPConnection, UnixJsonClient
from agent.wire import MAX_LINE_BYTES

Emit = Callable[[dict[str, Any]], None]
STREAMS = {0: "stdin", 1: "stdout", 2: "stderr"}


def parse_timestamp(stamp: str) -> int | None:
    """RFC 3339 with nanoseconds, as Docker writes it (``2025-05-14T08:23:05.123456789Z``)."""
    if not stamp.endswith("Z") or len(stamp) < 20:
        return None
    base, _, fraction = stamp[:-1].partition(".")
    try:
        seconds = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
        nanos = int((fraction + "000000000")[:9]) if fraction else 0
    except ValueError:
        return None
    return seconds * 1_000_000_000 + nanos


def demux(chunks: Iterator[bytes], tty: bool) -> Iterator[tuple[str, bytes]]:
    """``(stream, line)`` from the log body: raw bytes with a TTY, else 8-byte-header frames."""
    buffers: dict[str, bytes] = {}
    pending = b""
    for chunk in chunks:
        if tty:
            pieces = [("stdout", chunk)]
        else:
            pending += chunk
            pieces = []
            while len(pending) >= 8:
                kind, size = pending[0], struct.unpack(">I", pending[4:8])[0]
                if len(pending) < 8 + size:
                    break
                pieces.append((STREAMS.get(kind, "stdout"), pending[8 : 8 + size]))
                pending = pending[8 + size :]
        for stream, data in pieces:
            buffer = buffers.get(stream, b"") + data
            *lines, rest = buffer.split(b"\n")
            if len(rest) > MAX_LINE_BYTES:
                lines.append(rest)
                rest = b""
            buffers[stream] = rest
            for line in lines:
                yield stream, line
    for stream, rest in buffers.items():
        if rest:
            yield stream, rest


class _Follower(threading.Thread):
    """Follows one container's log until the stream ends (container stopped) or it is closed."""

    def __init__(self, owner: DockerLogSource, cid: str, name: str, tty: bool, since: int) -> None:
        super().__init__(name=f"docker-logs-{name}", daemon=True)
        self.owner, self.cid, self.container, self.tty, self.since = owner, cid, name, tty, since
        self.conn = UnixHTTPConnection(owner.socket_path, timeout=None)  # a quiet log is fine

    def close(self) -> None:
        # shutdown() wakes the blocked read; close() alone would not.
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _chunks(self) -> Iterator[bytes]:
        query = urllib.parse.urlencode(
            {
                "follow": "1",
                "stdout": "1",
                "stderr": "1",
                "timestamps": "1",
                "since": f"{self.since // 1_000_000_000}.{self.since % 1_000_000_000:09d}",
            }
        )
        self.conn.request("GET", f"/containers/{self.cid}/logs?{query}")
        response = self.conn.getresponse()
        if response.status != 200:
            raise OSError(f"logs of {self.container}: HTTP {response.status}")
        while chunk := response.read1(65536):
            yield chunk

    def run(self) -> None:
        try:
            for stream, raw in demux(self._chunks(), self.tty):
                self.owner.line(self.container, stream, raw)
        except Exception as exc:  # the daemon restarted, socket gone: the owner re-attaches
            if not self.owner.stopping:
                self.owner.report_error(f"{self.container}: {exc}")
        finally:
            self.conn.close()


class DockerLogSource:
    """LineSource ``docker_logs``: every chosen running container's stdout/stderr.

    Lines carry Docker's own timestamp as ``ts`` and ``fields={"container", "stream"}``.
    Containers are re-scanned every ``rescan_s``; a container whose stream ended (restart,
    new container of the same name) is re-attached from just after the last line seen, or
    from the moment this source started, so no line is lost or repeated.
    """

    name = "docker_logs"

    def __init__(
        self,
        socket_path: str = DOCKER_SOCKET,
        *,
        names: tuple[str, ...] = (),
        label: str | None = DEFAULT_LABEL,
        source: str = "vllm",
        clock: Callable[[], float] = time.time,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        rescan_s: float = 2.0,
    ) -> None:
        self.socket_path = socket_path
        self.names, self.label, self._source = names, label, source
        self._clock = clock
        self._on_event = on_event or (lambda kind, data: None)
        self._rescan_s = rescan_s
        self._followers: dict[str, _Follower] = {}
        self._last_ns: dict[str, int] = {}  # per container name: newest line timestamp seen
        self._emit: Emit = lambda line: None
        self._failing = False
        self.stopping = False

    def line(self, container: str, stream: str, raw: bytes) -> None:
        stamp, _, body = raw.partition(b" ")
        ns = parse_timestamp(stamp.decode("ascii", errors="replace"))
        if ns is None:  # not a timestamped line: keep all of it, stamp it now
            body, ns = raw, int(self._clock() * 1e9)
        self._last_ns[container] = max(ns, self._last_ns.get(container, 0))
        text = body.rstrip(b"\r").decode("utf-8", errors="replace")
        fields = {"container": container, "stream": stream}
        self._emit(make_line(ns / 1e9, self._source, text, fields, level_priority(text)))

    def report_error(self, error: str) -> None:
        if not self._failing:  # once per outage, then quiet retries
            self._on_event("source_error", {"source": self.name, "error": error})
        self._failing = True

    def _scan(self, client: UnixJsonClient, start_ns: int) -> None:
        for item in list_containers(client, self.names, self.label):
            cid, name = item["Id"], item["Name"]
            follower = self._followers.get(cid)
            if item.get("State") != "running" or (follower and follower.is_alive()):
                continue
            tty = bool((client.get_json(f"/containers/{cid}/json").get("Config") or {}).get("Tty"))
            since = self._last_ns[name] + 1 if name in self._last_ns else start_ns
            follower = _Follower(self, cid, name, tty, since)
            self._followers[cid] = follower
            follower.start()

    def run(self, emit: Emit, stop: threading.Event) -> None:
        self._emit = emit
        start_ns = int(self._clock() * 1e9)
        client = UnixJsonClient(self.socket_path, timeout=0.5)
        try:
            while not stop.is_set():
                try:
                    self._scan(client, start_ns)
                    self._failing = False
                except Exception as exc:
                    self.report_error(str(exc) or type(exc).__name__)
                stop.wait(self._rescan_s)
        finally:
            self.stopping = True
            client.close()
            for follower in self._followers.values():
                follower.close()
            for follower in self._followers.values():
                follower.join(timeout=2.0)
