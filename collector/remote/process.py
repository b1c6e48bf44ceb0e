"""Long-running remote commands (a vLLM server, a workload) streaming their lines back."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import paramiko

from collector.remote.commands import (
    DEFAULT_KILL_GRACE_S,
    READ_CHUNK,
    PgidReader,
    exit_status_of,
    kill_remote_group,
    open_exec,
    remote_command,
    wait_readable,
)
from collector.remote.connect import (
    DEFAULT_CONNECT_TIMEOUT_S,
    SSH_DOWN,
    SSHError,
    SSHTarget,
    connect,
)

log = logging.getLogger(__name__)

LineCallback = Callable[[str], None]


class RemoteProcess:
    """A long-running remote command in its own process group, streaming lines to callbacks."""

    def __init__(
        self,
        target: SSHTarget,
        argv: Sequence[str],
        client: paramiko.SSHClient,
        chan: paramiko.Channel,
        pgid: int,
        first_stdout: bytes,
        on_stdout: LineCallback | None,
        on_stderr: LineCallback | None,
        connect_timeout: float,
    ) -> None:
        self.target = target
        self.argv = tuple(argv)
        self.pgid = pgid
        self._client = client
        self._chan = chan
        self._callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        self._partial = {"stdout": bytearray(first_stdout), "stderr": bytearray()}
        self._connect_timeout = connect_timeout
        self.exit_status_of: int | None = None
        self._reader = threading.Thread(
            target=self._read, name=f"ssh-{target.host}-{pgid}", daemon=True
        )
        self._reader.start()

    @property
    def running(self) -> bool:
        return self._reader.is_alive()

    @property
    def exit_status(self) -> int | None:
        """The exit status once ended (None while running or if it died by a signal)."""
        return self.exit_status_of

    def _emit(self, stream: str, data: bytes, final: bool = False) -> None:
        buffer = self._partial[stream]
        buffer += data
        *lines, rest = bytes(buffer).split(b"\n")
        if final and rest:
            lines.append(rest)
            rest = b""
        self._partial[stream] = bytearray(rest)
        callback = self._callbacks[stream]
        if callback is None:
            return
        for line in lines:
            try:
                callback(line.decode("utf-8", errors="replace"))
            except Exception:
                log.exception("%s: line callback failed", self.target.host)

    def _read(self) -> None:
        chan = self._chan
        self._emit("stdout", b"")
        while True:
            if chan.recv_ready():
                self._emit("stdout", chan.recv(READ_CHUNK))
            elif chan.recv_stderr_ready():
                self._emit("stderr", chan.recv_stderr(READ_CHUNK))
            elif (chan.eof_received and chan.exit_status_ready()) or chan.closed:
                break
            else:
                wait_readable(chan, 0.5)
        self._emit("stdout", b"", final=True)
        self._emit("stderr", b"", final=True)
        self.exit_status_of = exit_status_of(chan)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the command to end and return its exit status; TimeoutError if it doesn't."""
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise TimeoutError(f"{self.target.host}: {self.argv[0]} still running")
        return self.exit_status_of

    def kill_group(self, grace_s: float = DEFAULT_KILL_GRACE_S) -> None:
        """SIGTERM the whole remote group, SIGKILL what is left after `grace_s`."""
        kill_remote_group(self._client, self.target, self.pgid, grace_s, self._connect_timeout)
        with contextlib.suppress(TimeoutError):
            self.wait(self._connect_timeout)

    def abandon(self) -> None:
        """Drop the connection without killing the group: its host froze or rebooted, so a
        kill would hang (the group's pgid stays for a kill once the host is back)."""
        self._client.close()
        with contextlib.suppress(*SSH_DOWN):
            self._chan.close()
        with contextlib.suppress(TimeoutError):
            self.wait(self._connect_timeout)

    def close(self) -> None:
        """Kill the group if it still runs, then drop the connection."""
        try:
            if self.running:
                self.kill_group()
        finally:
            with contextlib.suppress(*SSH_DOWN):  # the host just went away: nothing to close
                self._chan.close()
            self._client.close()

    def __enter__(self) -> RemoteProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_group(
    target: SSHTarget,
    argv: Sequence[str],
    *,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
    env: Mapping[str, str] | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> RemoteProcess:
    """Start `argv` on the target in a new session/process group on a connection of its own."""
    client = connect(target, timeout=connect_timeout)
    try:
        chan = open_exec(client, target.host, remote_command(argv, env), connect_timeout)
        pgid = PgidReader()
        first = b""
        deadline = time.monotonic() + connect_timeout
        while pgid.pgid is None:
            if chan.recv_ready():
                first += pgid.feed(chan.recv(READ_CHUNK))
                continue
            if chan.closed or chan.eof_received or time.monotonic() > deadline:
                stderr = chan.recv_stderr(READ_CHUNK) if chan.recv_stderr_ready() else b""
                raise SSHError(
                    target.host,
                    f"{argv[0]} did not start: {stderr.decode('utf-8', errors='replace')}",
                )
            wait_readable(chan, 0.2)
    except BaseException:
        client.close()
        raise
    return RemoteProcess(
        target, argv, client, chan, pgid.pgid, first, on_stdout, on_stderr, connect_timeout
    )
