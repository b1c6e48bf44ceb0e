"""The collector's SSH client: pinned host keys, argv-exact remote commands, killable groups.

Contract:
- `connect` verifies the server's host key against the one stored for the host and refuses
  unknown or different keys (`HostKeyUnknown`, `HostKeyMismatch`); trust on first use is an
  explicit, separate step (`fetch_host_key`).
- Remote commands are built from an argv with `shlex.join`, so every argument arrives verbatim.
  The remote login shell must be POSIX (sh, bash, dash, zsh).
- Every command runs in a session and process group of its own (`setsid sh -c 'echo $$; exec
  "$@"'`); its pgid is the first line of stdout, so a timeout, cancel or shutdown kills the whole
  group with `kill -s TERM -- -PGID` (then KILL) over a separate exec. A command killed by a
  signal reports exit status 128 + signal number.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import re
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import paramiko

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_KILL_GRACE_S = 2.0
_READ_CHUNK = 65536
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The outer sh runs setsid as a child (not a group leader, so setsid does not fork) and waits
# for it, passing its exit status on; `$$` of the inner sh is the pid of the exec'd command and,
# thanks to setsid, its pgid. The outer sh's own stderr goes to /dev/null (it reports
# "Terminated" when the group is killed); the command gets the real stderr back from fd 3.
_INNER = 'exec 2>&3 3>&-; echo "$$"; exec "$@"'
_OUTER = f'exec 3>&2 2>/dev/null; setsid sh -c {shlex.quote(_INNER)} freezewatch "$@"; exit $?'
_GROUP_WRAPPER = ("sh", "-c", _OUTER, "freezewatch")

LineCallback = Callable[[str], None]


class SSHError(Exception):
    """Base of every SSH failure; `host` names the target."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host


class SSHConnectError(SSHError):
    """TCP connect, banner, key exchange, authentication or a lost connection failed."""


class HostKeyUnknown(SSHError):
    """No host key is stored for the target; the offered key is given for an explicit trust."""

    def __init__(self, host: str, offered_key_line: str, fingerprint: str) -> None:
        super().__init__(host, f"unknown host key {fingerprint}; refusing (trust it explicitly)")
        self.offered_key_line = offered_key_line
        self.fingerprint = fingerprint


class HostKeyMismatch(SSHError):
    """The server offered a key other than the stored one: a reinstalled host or an attack."""

    def __init__(
        self, host: str, offered_key_line: str, fingerprint: str, expected_fingerprint: str
    ) -> None:
        super().__init__(
            host,
            f"host key mismatch: offered {fingerprint}, stored {expected_fingerprint}; refusing",
        )
        self.offered_key_line = offered_key_line
        self.fingerprint = fingerprint
        self.expected_fingerprint = expected_fingerprint


@dataclass(frozen=True)
class SSHTarget:
    """Where and as whom to log in; `known_host_key` is the stored `ssh-ed25519 AAAA...` line."""

    user: str
    host: str
    port: int = 22
    key_path: str | Path | None = None
    known_host_key: str | None = None

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class RunResult:
    """Outcome of one remote command; `exit_status` is None when it timed out or died by signal."""

    argv: tuple[str, ...]
    stdout: bytes
    stderr: bytes
    exit_status: int | None
    duration_s: float
    timed_out: bool
    truncated: bool

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out


def key_line(key: paramiko.PKey) -> str:
    """`ssh-ed25519 AAAA...` for a key, the form stored per host."""
    return f"{key.get_name()} {key.get_base64()}"


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style `SHA256:...` fingerprint, as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def parse_key_line(line: str) -> paramiko.PKey:
    """Parse `TYPE BASE64 [comment]`, also accepting a leading known_hosts host field."""
    fields = line.split()
    if len(fields) >= 3 and not fields[0].startswith(("ssh-", "ecdsa-", "sk-")):
        fields = fields[1:]
    if len(fields) < 2:
        raise ValueError(f"not a public key line: {line!r}")
    try:
        return paramiko.PKey.from_type_string(fields[0], base64.b64decode(fields[1]))
    except (ValueError, paramiko.SSHException) as exc:
        raise ValueError(f"not a public key line: {line!r}: {exc}") from exc


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class _RefuseUnknownKey(paramiko.MissingHostKeyPolicy):
    """Paramiko calls this when no stored key of the offered type exists: always refuse."""

    def __init__(self, host: str, expected: paramiko.PKey | None) -> None:
        self.host = host
        self.expected = expected

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if self.expected is None:
            raise HostKeyUnknown(self.host, key_line(key), fingerprint(key))
        raise HostKeyMismatch(
            self.host, key_line(key), fingerprint(key), fingerprint(self.expected)
        )


def connect(
    target: SSHTarget,
    *,
    timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    banner_timeout: float | None = None,
    auth_timeout: float | None = None,
) -> paramiko.SSHClient:
    """Log in with the target's key after verifying the host key; raises SSHError subclasses."""
    expected = parse_key_line(target.known_host_key) if target.known_host_key else None
    client = paramiko.SSHClient()
    if expected is not None:
        client.get_host_keys().add(
            _known_hosts_name(target.host, target.port), expected.get_name(), expected
        )
    client.set_missing_host_key_policy(_RefuseUnknownKey(target.host, expected))
    try:
        client.connect(
            target.host,
            port=target.port,
            username=target.user,
            key_filename=str(target.key_path) if target.key_path else None,
            timeout=timeout,
            banner_timeout=banner_timeout if banner_timeout is not None else timeout,
            auth_timeout=auth_timeout if auth_timeout is not None else timeout,
            look_for_keys=False,
            allow_agent=False,
        )
    except SSHError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyMismatch(
            target.host,
            key_line(exc.key),
            fingerprint(exc.key),
            fingerprint(exc.expected_key),
        ) from exc
    except paramiko.AuthenticationException as exc:
        client.close()
        raise SSHConnectError(
            target.host, f"authentication as {target.user} failed: {exc}"
        ) from exc
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        reason = str(exc) or type(exc).__name__
        raise SSHConnectError(target.host, f"cannot connect to {target.address}: {reason}") from exc
    return client


def fetch_host_key(
    host: str, port: int = 22, timeout: float = DEFAULT_CONNECT_TIMEOUT_S
) -> tuple[str, str]:
    """The server's host key line and its SHA256 fingerprint, for explicit trust on first use."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise SSHConnectError(host, f"cannot connect to {host}:{port}: {exc}") from exc
    transport = paramiko.Transport(sock)
    transport.banner_timeout = timeout
    try:
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise SSHConnectError(host, f"no host key from {host}:{port}: {exc}") from exc
    finally:
        transport.close()
    return key_line(key), fingerprint(key)


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The exact string sent as the SSH exec request: argv quoted, in its own process group."""
    if not argv:
        raise ValueError("empty argv")
    prefix: list[str] = []
    if env:
        bad = [name for name in env if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"invalid environment variable names: {bad}")
        prefix = ["env", *(f"{name}={value}" for name, value in env.items())]
    return shlex.join([*_GROUP_WRAPPER, *prefix, *argv])


def kill_group_command(pgid: int, grace_s: float = DEFAULT_KILL_GRACE_S) -> str:
    """Remote command: TERM the group, wait up to `grace_s` for it to go, then KILL it."""
    steps = max(1, int(grace_s * 10))
    script = (
        f"kill -s TERM -- -{int(pgid)} 2>/dev/null || exit 0; i=0; "
        f'while [ "$i" -lt {steps} ]; do kill -s 0 -- -{int(pgid)} 2>/dev/null || exit 0; '
        f"sleep 0.1; i=$((i+1)); done; kill -s KILL -- -{int(pgid)} 2>/dev/null; exit 0"
    )
    return shlex.join(["sh", "-c", script])


def _kill_group(
    client: paramiko.SSHClient | None,
    target: SSHTarget,
    pgid: int,
    grace_s: float,
    connect_timeout: float,
) -> None:
    """Kill a remote group over a new exec channel (a new connection if the old one is gone)."""
    own = None
    transport = client.get_transport() if client is not None else None
    if transport is None or not transport.is_active():
        own = connect(target, timeout=connect_timeout)
        transport = own.get_transport()
    assert transport is not None
    try:
        chan = transport.open_session(timeout=connect_timeout)
        chan.settimeout(grace_s + connect_timeout)
        chan.exec_command(kill_group_command(pgid, grace_s))
        status = chan.recv_exit_status()
        chan.close()
        log.info("killed remote process group %s on %s (status %s)", pgid, target.host, status)
    except (paramiko.SSHException, OSError) as exc:
        raise SSHError(target.host, f"could not kill process group {pgid}: {exc}") from exc
    finally:
        if own is not None:
            own.close()


class _Capture:
    """Keeps at most `limit` bytes of a stream: its head or its tail."""

    def __init__(self, limit: int, keep: Literal["head", "tail"]) -> None:
        self.limit = limit
        self.keep = keep
        self.buffer = bytearray()
        self.truncated = False

    def feed(self, data: bytes) -> None:
        if self.keep == "head":
            room = self.limit - len(self.buffer)
            if len(data) > room:
                self.truncated = True
            self.buffer += data[: max(room, 0)]
            return
        self.buffer += data
        if len(self.buffer) > 2 * self.limit:  # trim rarely, not per chunk
            del self.buffer[: len(self.buffer) - self.limit]
            self.truncated = True

    def value(self) -> bytes:
        if len(self.buffer) > self.limit:
            self.truncated = True
            return bytes(self.buffer[-self.limit :])
        return bytes(self.buffer)


class _PgidReader:
    """Splits the wrapper's first stdout line (the pgid) from the command's own output."""

    def __init__(self) -> None:
        self.pgid: int | None = None
        self._pending = bytearray()

    def feed(self, data: bytes) -> bytes:
        """Returns the part of `data` that belongs to the command's stdout."""
        if self.pgid is not None:
            return data
        self._pending += data
        line, sep, rest = self._pending.partition(b"\n")
        if not sep:
            return b""
        self.pgid = int(line)
        self._pending = bytearray()
        return bytes(rest)


def _open_exec(
    client: paramiko.SSHClient, host: str, command: str, timeout: float
) -> paramiko.Channel:
    transport = client.get_transport()
    if transport is None or not transport.is_active():
        raise SSHConnectError(host, "connection is closed")
    try:
        chan = transport.open_session(timeout=timeout)
        chan.exec_command(command)
        chan.shutdown_write()  # the command reads EOF from stdin
    except (paramiko.SSHException, OSError) as exc:
        raise SSHConnectError(host, f"cannot start remote command: {exc}") from exc
    return chan


def _wait_readable(chan: paramiko.Channel, timeout: float) -> None:
    if chan.eof_received:
        # All output is in; only the exit status may still be on its way.
        chan.status_event.wait(timeout)
    else:
        select.select([chan], [], [], timeout)


def _exit_status(chan: paramiko.Channel) -> int | None:
    if not chan.exit_status_ready():
        return None
    status = chan.recv_exit_status()
    return None if status == -1 else status  # -1: killed by a signal (exit-signal message)


def run(
    target: SSHTarget,
    argv: Sequence[str],
    *,
    timeout: float,
    max_output: int = 1 << 20,
    keep: Literal["head", "tail"] = "tail",
    env: Mapping[str, str] | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
    client: paramiko.SSHClient | None = None,
) -> RunResult:
    """Run `argv` on the target, waiting at most `timeout` s (connecting not included).

    Each stream keeps at most `max_output` bytes (the tail by default: the end of a log is
    where a freeze shows). On timeout the remote process group is killed. Pass `client` to
    reuse a connection from `connect`; otherwise one is opened and closed here.
    """
    argv = tuple(argv)
    own_client = client is None
    active = connect(target, timeout=connect_timeout) if client is None else client
    try:
        started = time.monotonic()
        deadline = started + timeout
        chan = _open_exec(active, target.host, remote_command(argv, env), connect_timeout)
        out, err = _Capture(max_output, keep), _Capture(max_output, keep)
        pgid = _PgidReader()
        timed_out = False
        while True:
            if chan.recv_ready():
                out.feed(pgid.feed(chan.recv(_READ_CHUNK)))
                continue
            if chan.recv_stderr_ready():
                err.feed(chan.recv_stderr(_READ_CHUNK))
                continue
            if chan.eof_received and chan.exit_status_ready():
                break
            if chan.closed:
                if not chan.exit_status_ready():
                    raise SSHConnectError(target.host, f"connection lost while running {argv[0]}")
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            _wait_readable(chan, min(remaining, 0.5))
        duration = time.monotonic() - started
        status = None if timed_out else _exit_status(chan)
        if timed_out:
            log.warning("%s: %s timed out after %.1f s", target.host, argv[0], timeout)
            if pgid.pgid is not None:
                try:
                    _kill_group(active, target, pgid.pgid, kill_grace_s, connect_timeout)
                except SSHError as exc:  # e.g. the host went away; the timeout is the result
                    log.warning("%s", exc)
            else:
                log.warning("%s: no pgid received; cannot kill %s", target.host, argv[0])
        chan.close()
        return RunResult(
            argv=argv,
            stdout=out.value(),
            stderr=err.value(),
            exit_status=status,
            duration_s=duration,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
        )
    finally:
        if own_client:
            active.close()


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
        self._exit_status: int | None = None
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
        return self._exit_status

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
                self._emit("stdout", chan.recv(_READ_CHUNK))
            elif chan.recv_stderr_ready():
                self._emit("stderr", chan.recv_stderr(_READ_CHUNK))
            elif (chan.eof_received and chan.exit_status_ready()) or chan.closed:
                break
            else:
                _wait_readable(chan, 0.5)
        self._emit("stdout", b"", final=True)
        self._emit("stderr", b"", final=True)
        self._exit_status = _exit_status(chan)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the command to end and return its exit status; TimeoutError if it doesn't."""
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise TimeoutError(f"{self.target.host}: {self.argv[0]} still running")
        return self._exit_status

    def kill_group(self, grace_s: float = DEFAULT_KILL_GRACE_S) -> None:
        """SIGTERM the whole remote group, SIGKILL what is left after `grace_s`."""
        _kill_group(self._client, self.target, self.pgid, grace_s, self._connect_timeout)
        with contextlib.suppress(TimeoutError):
            self.wait(self._connect_timeout)

    def close(self) -> None:
        """Kill the group if it still runs, then drop the connection."""
        try:
            if self.running:
                self.kill_group()
        finally:
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
        chan = _open_exec(client, target.host, remote_command(argv, env), connect_timeout)
        pgid = _PgidReader()
        first = b""
        deadline = time.monotonic() + connect_timeout
        while pgid.pgid is None:
            if chan.recv_ready():
                first += pgid.feed(chan.recv(_READ_CHUNK))
                continue
            if chan.closed or chan.eof_received or time.monotonic() > deadline:
                stderr = chan.recv_stderr(_READ_CHUNK) if chan.recv_stderr_ready() else b""
                raise SSHError(
                    target.host,
                    f"{argv[0]} did not start: {stderr.decode('utf-8', errors='replace')}",
                )
            _wait_readable(chan, 0.2)
    except BaseException:
        client.close()
        raise
    return RemoteProcess(
        target, argv, client, chan, pgid.pgid, first, on_stdout, on_stderr, connect_timeout
    )


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
        except (paramiko.SSHException, OSError) as exc:
            log.warning("%s: forward to %s:%s failed: %s", self.target.host, *self.remote, exc)
            conn.close()
            return
        with self._lock:
            self._open.update((conn, chan))
        try:
            self._pump(conn, chan)
        except (OSError, paramiko.SSHException) as exc:
            log.debug("%s: forwarded connection ended: %s", self.target.host, exc)
        finally:
            with self._lock:
                self._open.difference_update((conn, chan))
            # The transport may already be gone (closer called, host dropped): closing a
            # channel then raises EOFError, which must not escape this daemon thread.
            with contextlib.suppress(EOFError, OSError, paramiko.SSHException):
                chan.close()
            conn.close()

    def _pump(self, conn: socket.socket, chan: paramiko.Channel) -> None:
        while not self._stop.is_set():
            readable, _, _ = select.select([conn, chan], [], [], 0.5)
            if conn in readable:
                data = conn.recv(_READ_CHUNK)
                if not data:
                    return
                chan.sendall(data)
            if chan in readable:
                data = chan.recv(_READ_CHUNK)
                if not data:
                    return
                conn.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for item in list(self._open):
                with contextlib.suppress(OSError):
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
