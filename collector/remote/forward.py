"""Local port forwards through SSH: reach a port on the host as if it were here."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable

import paramiko

from collector.remote.commands import READ_CHUNK
from collector.remote.connect import DEFAULT_CONNECT_TIMEOUT_S, SSH_DOWN, SSHTarget, connect
from collector.trouble import Trouble

log = logging.getLogger(__name__)


class _PortForward:
    """A local listening socket whose connections are tunnelled as direct-tcpip channels."""

    def __init__(
        self,
        target: SSHTarget,
        client: paramiko.SSHClient,
        remote: tuple[str, int],
        local_host: str,
        connect_timeout: float,
    ) -> None:
        self.target = target
        self.remote = remote
        self._client = client
        self._connect_timeout = connect_timeout
        self._trouble = Trouble(
            log,
            f"{target.host}: forward to {remote[0]}:{remote[1]} failed",
            f"{target.host}: forward to {remote[0]}:{remote[1]} works again",
        )
        self._stop = threading.Event()
        self._open: set[socket.socket | paramiko.Channel] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((local_host, 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)  # lets the accept loop notice close()
        self.local_port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept_loop, name="ssh-forward-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(
                target=self._tunnel, args=(conn, peer), name="ssh-forward", daemon=True
            ).start()

    def _tunnel(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        transport = self._client.get_transport()
        try:
            if transport is None or not transport.is_active():
                raise paramiko.SSHException("connection is closed")
            chan = transport.open_channel(
                "direct-tcpip", self.remote, peer, timeout=self._connect_timeout
            )
        except SSH_DOWN as exc:
            self._trouble.failed(exc)
            conn.close()
            return
        self._trouble.passed()
        with self._lock:
            self._open.update((conn, chan))
        try:
            self._pump(conn, chan)
        except SSH_DOWN as exc:
            log.debug("%s: forwarded connection ended: %s", self.target.host, exc)
        finally:
            with self._lock:
                self._open.difference_update((conn, chan))
            # The transport may already be gone (closer called, host dropped): closing a
            # channel then raises EOFError, which must not escape this daemon thread.
            with contextlib.suppress(*SSH_DOWN):
                chan.close()
            conn.close()

    def _pump(self, conn: socket.socket, chan: paramiko.Channel) -> None:
        while not self._stop.is_set():
            watched: list[socket.socket | paramiko.Channel] = [conn, chan]
            readable, _, _ = select.select(watched, [], [], 0.5)
            if conn in readable:
                data = conn.recv(READ_CHUNK)
                if not data:
                    return
                chan.sendall(data)
            if chan in readable:
                data = chan.recv(READ_CHUNK)
                if not data:
                    return
                conn.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for item in list(self._open):
                # A channel whose transport's socket is gone raises EOFError (paramiko's
                # packetizer): it escaped into a matrix run stopping its forward as the host
                # froze, and failed the run ("EOFError: ").
                with contextlib.suppress(*SSH_DOWN):
                    item.close()
        self._client.close()


def forward_local_port(
    target: SSHTarget,
    remote_host: str,
    remote_port: int,
    *,
    local_host: str = "127.0.0.1",
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> tuple[int, Callable[[], None]]:
    """Listen on `local_host`:<free port> and tunnel each connection to remote_host:remote_port
    as seen from the target. Returns the local port and a closer that stops it all."""
    client = connect(target, timeout=connect_timeout)
    try:
        forward = _PortForward(
            target, client, (remote_host, remote_port), local_host, connect_timeout
        )
    except BaseException:
        client.close()
        raise
    return forward.local_port, forward.close
