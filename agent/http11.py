"""A small HTTP/1.1 client connection over TCP, TLS or a unix socket, for the agent's three
peers (the collector, vLLM, the Docker Engine API).

Why not ``http.client``: importing it costs the agent ~8.5 MB of its ~20 MB (it loads ``ssl``
and the ``email`` package even for plain HTTP), and parsing each answer's headers through
``email`` costs more CPU than the rest of a small POST. Here ``ssl`` is loaded only for an
``https`` peer; TCP connections set ``TCP_NODELAY`` (a kernel line goes out at once); a
request is one ``send`` when small.

The API follows ``http.client``'s (``request``, ``getresponse``, ``read``, ``read1``,
``close``, ``sock``). A kept-alive connection is reused while answers are read whole and the
peer does not close it; failures are ``OSError``s (``RemoteDisconnected`` when a kept-alive
connection turns out closed, ``ProtocolError`` for an answer that is not HTTP).
"""

from __future__ import annotations

import errno
import io
import os
import socket
from collections.abc import Callable
from typing import Any

MAX_LINE = 65536  # status line, a header line or a chunk size line
MAX_HEADERS = 100
SMALL_BODY = 65536  # a body up to this joins the head in one send


class ProtocolError(ConnectionError):
    """The peer's answer is not HTTP/1.x (or is cut short): the connection is dropped."""


class RemoteDisconnected(ConnectionResetError):
    """The peer closed the connection without answering (e.g. a kept-alive one it timed out)."""


class Response:
    """An answer whose status and headers are read; the body is read with ``read``/``read1``."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str], length: int | None,
                 chunked: bool, will_close: bool) -> None:  # fmt: skip
        assert conn.file is not None
        self._conn = conn
        self._file: io.BufferedReader = conn.file
        self.status = status
        self.headers = headers
        self.will_close = will_close
        self._left = length  # body bytes still to read (content-length), or of the chunk
        self._chunked = chunked
        self._until_close = length is None and not chunked
        self.done = length == 0 and not chunked

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    def read1(self, n: int = 65536) -> bytes:
        """Some of the body (at most ``n`` bytes, at least one unless it is over): streaming."""
        if self.done:
            return b""
        if self._chunked and not self._left:
            self._left = self._chunk_size()
            if not self._left:
                self._finish()
                return b""
        want = n if self._left is None else min(n, self._left)
        data = self._file.read1(want)
        if not data:
            if self._until_close:
                self._finish()
                return b""
            raise ProtocolError("connection closed in the middle of an answer")
        if self._left is not None:
            self._left -= len(data)
            if not self._left:
                if self._chunked:
                    self._line()  # the CRLF after a chunk's data
                else:
                    self._finish()
        return data

    def read(self) -> bytes:
        """The rest of the body."""
        if not self._chunked and self._left and not self.done:
            data = self._file.read(self._left)
            if len(data) < self._left:
                raise ProtocolError("connection closed in the middle of an answer")
            self._left = 0
            self._finish()
            return data
        parts = []
        while part := self.read1(1 << 20):
            parts.append(part)
        return b"".join(parts)

    def _chunk_size(self) -> int:
        line = self._line()
        try:
            return int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line {line[:40]!r}") from None

    def _line(self) -> bytes:
        line = self._file.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise ProtocolError("connection closed in the middle of an answer")
        return line

    def _finish(self) -> None:
        if self._chunked:
            while self._line().strip():  # trailers, up to the blank line
                pass
        self.done = True
        self._conn.response_done(self)


class Connection:
    """One HTTP/1.1 connection to ``host:port`` (or the unix socket ``unix_path``); opened
    on the first request and again after any failure or a close by the peer."""

    def __init__(
        self,
        host: str,
        port: int | None = None,
        *,
        timeout: float | None = 5.0,
        https: bool = False,
        ssl_context: Any = None,
        unix_path: str | None = None,
        wait_writable: Callable[[int, float], bool] | None = None,
    ) -> None:
        """``wait_writable``: how to wait for a TCP connection to be made and for room to send
        a large body (the agent's outbox, which reads /dev/kmsg meanwhile); by default the
        socket's timeout blocks."""
        self.host = host
        self.port = port or (443 if https else 80)
        self.timeout = timeout
        self.https = https
        self.ssl_context = ssl_context
        self.unix_path = unix_path
        self.wait_writable = wait_writable
        self.sock: socket.socket | None = None
        self.file: io.BufferedReader | None = None
        self._busy: Response | None = None  # an answer whose body is not read yet
        self._method = "GET"  # of the request sent last
        name = f"[{host}]" if ":" in host else host
        default = 443 if https else 80
        self._host_header = name if unix_path or self.port == default else f"{name}:{self.port}"

    def connect(self) -> None:
        if self.unix_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.unix_path)
            except OSError:
                sock.close()
                raise
        else:
            if self.wait_writable is None or self.timeout is None:
                sock = socket.create_connection((self.host, self.port), self.timeout)
            else:
                sock = connect_waiting(self.host, self.port, self.timeout, self.wait_writable)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.https:
                import ssl  # only for an https peer: ssl alone is ~6 MB of RSS

                context = self.ssl_context or ssl.create_default_context()
                try:
                    sock = context.wrap_socket(sock, server_hostname=self.host)
                except OSError:
                    sock.close()
                    raise
        self.sock = sock
        self.file = io.BufferedReader(socket.SocketIO(sock, "rb"), 65536)  # sock.makefile("rb")

    def _send_large(self, body: bytes) -> None:
        """All of ``body``; with ``wait_writable``, waiting there whenever the socket's buffer
        is full (a collector that stalls mid-body). A small request goes at once with
        ``sendall``: the answer to the one before it was read, so nothing sent is pending."""
        assert self.sock is not None
        if self.wait_writable is None or self.timeout is None:
            self.sock.sendall(body)
            return
        view, fd = memoryview(body), self.sock.fileno()
        while view:
            if not self.wait_writable(fd, self.timeout):
                raise TimeoutError("timed out sending")
            view = view[self.sock.send(view) :]

    def settimeout(self, timeout: float | None) -> None:
        """The timeout of each socket operation from now on (this connection and the next)."""
        if timeout != self.timeout and self.sock is not None:
            self.sock.settimeout(timeout)  # a syscall: only when it changes
        self.timeout = timeout

    def close(self) -> None:
        self._busy = None
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> None:
        """Send a request (connecting first if needed); ``getresponse`` reads its answer."""
        if self._busy is not None:  # the last answer was not read whole: it cannot be reused
            self.close()
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self._method = method
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
        given = headers is not None and any(k.lower() == "content-length" for k in headers)
        if not given and (body or method in ("POST", "PUT", "PATCH")):
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if len(body) <= SMALL_BODY:
            self.sock.sendall(head + body)
        else:  # no copy of a large body
            self.sock.sendall(head)
            self._send_large(body)

    def getresponse(self) -> Response:
        """Read the status and headers of the answer to the request sent last."""
        if self.file is None:
            raise ProtocolError("no request was sent")
        while True:
            status, version = self._status_line()
            headers = self._headers()
            if not 100 <= status < 200 or status == 101:
                break  # 1xx interim answers (100 Continue) are skipped
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length: int | None = None
        if self._method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            length = 0
        elif not chunked and "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise ProtocolError("bad Content-Length") from None
            if length < 0:
                raise ProtocolError("bad Content-Length")
        will_close = close or (length is None and not chunked)
        response = Response(self, status, headers, length, chunked, will_close)
        self._busy = None if response.done else response
        if response.done and will_close:
            self.close()
        return response

    def response_done(self, response: Response) -> None:
        if self._busy is response:
            self._busy = None
        if response.will_close:
            self.close()

    def _status_line(self) -> tuple[int, str]:
        assert self.file is not None
        line = self.file.readline(MAX_LINE + 1)
        if not line:
            raise RemoteDisconnected("the peer closed the connection without answering")
        version, _, rest = line.decode("latin-1").partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit() or not line.endswith(b"\n"):
            raise ProtocolError(f"not an HTTP answer: {line[:60]!r}")
        return int(code), version

    def _headers(self) -> dict[str, str]:
        assert self.file is not None
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self.file.readline(MAX_LINE + 1)
            if not line.endswith(b"\n"):
                raise ProtocolError("answer headers cut short or too long")
            if line in (b"\r\n", b"\n"):
                return headers
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ProtocolError(f"bad header line {line[:60]!r}")
            key, value = name.strip().lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        raise ProtocolError(f"more than {MAX_HEADERS} headers")


def connect_waiting(
    host: str, port: int, timeout: float, wait_writable: Callable[[int, float], bool]
) -> socket.socket:
    """``socket.create_connection``, but the handshake awaited through ``wait_writable``: a
    collector that drops SYNs (a cut network) costs the timeout, not as long with no read."""
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code == errno.EINPROGRESS:
                if not wait_writable(sock.fileno(), timeout):
                    raise TimeoutError("timed out")
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))  # ECONNREFUSED: ConnectionRefusedError
            sock.settimeout(timeout)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error
