"""agent.http11 against a scripted raw-socket server: the answer framings HTTP/1.1 allows,
keep-alive reuse, a peer that closes, and answers that are not HTTP."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.http11 import Connection, ProtocolError, RemoteDisconnected


class Close(bytes):
    """An answer after which the server closes the connection."""


class Scripted:
    """Accepts connections; answers the n-th request (over all connections) with
    ``answers[n]`` (raw bytes; None: close without answering); records each request."""

    def __init__(self, answers: list[bytes | None], unix_path: str | None = None) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        family = socket.AF_UNIX if unix_path else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(unix_path or ("127.0.0.1", 0))
        self.sock.listen()
        self.port = 0 if unix_path else self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(data) < length:
                    data += conn.recv(65536)
                body, data = data[:length], data[length:]
                self.requests.append(head + b"\r\n\r\n" + body)
                answer = self.answers[len(self.requests) - 1]
                if answer is None:
                    return
                conn.sendall(answer)
                if isinstance(answer, Close):
                    return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    s = Scripted(request.param)
    yield s
    s.close()


def ok(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (head.encode(), len(body), body)


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: y\r\n\r\n"
)
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@pytest.mark.parametrize("server", [[ok(b"one"), CHUNKED, ok(b"three")]], indirect=True)
def test_answers_framed_by_length_and_chunked_share_one_connection(server: Scripted) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    bodies = []
    for path in ("/a", "/b", "/c"):
        conn.request("POST", path, b'{"x":1}', {"Authorization": "Bearer t"})
        response = conn.getresponse()
        assert response.status == 200
        bodies.append(response.read())
    assert bodies == [b"one", b"Wikipedia", b"three"]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /a HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
    assert b"\r\nAuthorization: Bearer t\r\nContent-Length: 7\r\n\r\n" in first
    assert first.endswith(b'{"x":1}')
    assert conn.sock is not None
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    conn.close()


@pytest.mark.parametrize(
    "server",
    [
        [
            b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after 100"),
            Close(b"HTTP/1.0 200 OK\r\n\r\nthe end"),
        ]
    ],
    indirect=True,
)
def test_interim_answers_are_skipped_and_a_body_without_length_ends_with_the_connection(
    server: Scripted,
) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/")
    assert conn.getresponse().read() == b"after 100"
    conn.request("GET", "/")
    response = conn.getresponse()
    assert response.will_close and response.read() == b"the end"
    assert conn.sock is None  # closed with the answer: the next request reconnects


@pytest.mark.parametrize("server", [[CHUNKED]], indirect=True)
def test_read1_streams_a_chunked_body(server: Scripted) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/logs")
    response = conn.getresponse()
    parts = []
    while part := response.read1(3):
        parts.append(part)
    assert parts == [b"Wik", b"i", b"ped", b"ia"]
    assert response.done


@pytest.mark.parametrize(
    "server", [[b"HTTP/1.1 204 No Content\r\n\r\n", ok(b"", "Connection: close")]], indirect=True
)
def test_no_content_and_connection_close(server: Scripted) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    conn.request("DELETE", "/x")
    response = conn.getresponse()
    assert response.status == 204 and response.read() == b""
    conn.request("POST", "/y", b"", {"Content-Length": "0"})
    assert conn.getresponse().read() == b""  # answered: the server has recorded the request
    assert b"Content-Length: 0\r\n\r\n" in server.requests[1]
    assert server.requests[1].count(b"Content-Length") == 1  # the caller's, not twice
    assert conn.sock is None


@pytest.mark.parametrize("server", [[ok(b"first"), None, ok(b"again")]], indirect=True)
def test_a_connection_the_peer_closed_raises_remote_disconnected(server: Scripted) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/")
    assert conn.getresponse().read() == b"first"
    conn.request("GET", "/")
    with pytest.raises(RemoteDisconnected):
        conn.getresponse()
    conn.close()
    conn.request("GET", "/")
    assert conn.getresponse().read() == b"again"
    assert server.connections == 2


@pytest.mark.parametrize(
    "server",
    [
        [b"SSH-2.0-OpenSSH_9.2\r\n"],
        [Close(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n"],
    ],
    indirect=True,
)
def test_an_answer_that_is_not_http_is_a_protocol_error(server: Scripted) -> None:
    conn = Connection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/")
    with pytest.raises(ProtocolError):
        conn.getresponse().read()
    conn.close()


def test_an_unread_answer_is_not_reused(tmp_path: Path) -> None:
    server = Scripted([CHUNKED, ok(b"second")], unix_path=str(tmp_path / "api.sock"))
    try:
        conn = Connection("localhost", unix_path=str(tmp_path / "api.sock"), timeout=5)
        conn.request("GET", "/first")
        assert conn.getresponse().read1(2) == b"Wi"  # body left unread
        conn.request("GET", "/second")  # so a fresh connection
        assert conn.getresponse().read() == b"second"
        assert server.connections == 2
        assert server.requests[0].startswith(b"GET /first HTTP/1.1\r\nHost: localhost\r\n")
    finally:
        server.close()


class Waits:
    """A ``wait_writable`` that polls for real and notes the descriptors it was asked for;
    ``give_up``: it returns False at once, as the outbox's does when its timeout passes."""

    def __init__(self, give_up: bool = False) -> None:
        self.asked: list[int] = []
        self.give_up = give_up

    def __call__(self, fd: int, timeout: float) -> bool:
        self.asked.append(fd)
        if self.give_up:
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return bool(poller.poll(timeout * 1000))


@pytest.mark.parametrize("server", [[ok(b"one"), ok(b"two")]], indirect=True)
def test_with_a_wait_connect_and_a_large_send_wait_there(server: Scripted) -> None:
    """The shipping thread's wait (which reads /dev/kmsg meanwhile) is where a connect and
    a large body wait for the socket; a small request goes at once."""
    waits = Waits()
    conn = Connection("127.0.0.1", server.port, timeout=5, wait_writable=waits)
    conn.request("POST", "/small", b"x" * 100)
    assert conn.getresponse().read() == b"one"
    assert conn.sock is not None
    fd = conn.sock.fileno()
    assert waits.asked == [fd]  # the handshake only
    big = bytes(range(256)) * (8 << 12)  # 8 MiB: more than a socket buffer takes at once
    conn.request("POST", "/big", big)
    assert conn.getresponse().read() == b"two"
    assert len(waits.asked) > 1 and set(waits.asked[1:]) == {fd}
    assert server.requests[1].endswith(big)


def test_with_a_wait_a_refused_connect_is_still_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        conn = Connection("127.0.0.1", port, timeout=5, wait_writable=Waits())
        with pytest.raises(ConnectionRefusedError):
            conn.request("GET", "/")
    assert conn.sock is None


def test_with_a_wait_that_gives_up_the_connect_times_out_and_leaves_nothing_open() -> None:
    """A non-blocking connect is in progress until the handshake is seen (on loopback too):
    a wait that gives up (its timeout passed) is a timeout, and no socket stays open."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        waits = Waits(give_up=True)
        conn = Connection("127.0.0.1", listening.getsockname()[1], timeout=5, wait_writable=waits)
        with pytest.raises(TimeoutError):
            conn.request("GET", "/")
        assert len(waits.asked) == 1
        assert conn.sock is None
