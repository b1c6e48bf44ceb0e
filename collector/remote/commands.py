"""Remote commands built from an argv, each in a process group of its own, killable as one.

Commands are built with ``shlex.quote``, so every argument arrives verbatim (a ``HomePath``
gets the remote ``$HOME`` in front instead of its ``~``); the remote login shell must be POSIX
(sh, bash, dash, zsh). Every command runs in a session and process group of
its own (``setsid sh -c 'echo $$; exec "$@"'``); its pgid is the first line of stdout, so a
timeout, cancel or shutdown kills the whole group with ``kill -s TERM -- -PGID`` (then KILL)
over a separate exec. A command killed by a signal reports exit status 128 + signal number.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import paramiko

from collector.remote.connect import (
    DEFAULT_CONNECT_TIMEOUT_S,
    SSH_DOWN,
    SSHConnectError,
    SSHError,
    SSHTarget,
    connect,
)

log = logging.getLogger(__name__)

DEFAULT_KILL_GRACE_S = 2.0
READ_CHUNK = 65536
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The outer sh runs setsid as a child (not a group leader, so setsid does not fork) and waits
# for it, passing its exit status on; `$$` of the inner sh is the pid of the exec'd command and,
# thanks to setsid, its pgid. The outer sh's own stderr goes to /dev/null (it reports
# "Terminated" when the group is killed); the command gets the real stderr back from fd 3.
_INNER = 'exec 2>&3 3>&-; echo "$$"; exec "$@"'
_OUTER = f'exec 3>&2 2>/dev/null; setsid sh -c {shlex.quote(_INNER)} freezewatch "$@"; exit $?'
_GROUP_WRAPPER = ("sh", "-c", _OUTER, "freezewatch")


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


class HomePath(str):
    """An argument that starts in the remote user's home: ``~/x`` (or ``~``, ``~:x``) reaches
    the command as ``$HOME/x``, expanded by the remote login shell (``"$HOME"``, quoted); the
    rest of it stays verbatim. Every other argument is passed as written."""

    def __new__(cls, value: str) -> HomePath:
        if not value.startswith("~") or value[1:2] not in ("", "/", ":"):
            raise ValueError(f"{value!r} does not start with ~/ (~user is not supported)")
        return super().__new__(cls, value)


def quote_arg(arg: str) -> str:
    """One argument as the remote shell must read it (``HomePath``: its ``~`` as $HOME)."""
    if isinstance(arg, HomePath):
        return '"$HOME"' + shlex.quote(arg[1:]) if len(arg) > 1 else '"$HOME"'
    return shlex.quote(arg)


def shell_join(argv: Sequence[str]) -> str:
    """The command line a POSIX shell turns back into ``argv`` (``HomePath`` expanded)."""
    return " ".join(quote_arg(arg) for arg in argv)


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
    return shell_join([*_GROUP_WRAPPER, *prefix, *argv])


def kill_group_argv(pgid: int, grace_s: float = DEFAULT_KILL_GRACE_S) -> list[str]:
    """Remote argv: TERM the group, wait up to `grace_s` for it to go, then KILL it (exit 0
    also when the group is already gone)."""
    steps = max(1, int(grace_s * 10))
    script = (
        f"kill -s TERM -- -{int(pgid)} 2>/dev/null || exit 0; i=0; "
        f'while [ "$i" -lt {steps} ]; do kill -s 0 -- -{int(pgid)} 2>/dev/null || exit 0; '
        f"sleep 0.1; i=$((i+1)); done; kill -s KILL -- -{int(pgid)} 2>/dev/null; exit 0"
    )
    return ["sh", "-c", script]


def kill_group_command(pgid: int, grace_s: float = DEFAULT_KILL_GRACE_S) -> str:
    """`kill_group_argv` as the string of one exec request."""
    return shlex.join(kill_group_argv(pgid, grace_s))


def kill_remote_group(
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
    except SSH_DOWN as exc:
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


class PgidReader:
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


def open_exec(
    client: paramiko.SSHClient, host: str, command: str, timeout: float
) -> paramiko.Channel:
    transport = client.get_transport()
    if transport is None or not transport.is_active():
        raise SSHConnectError(host, "connection is closed")
    try:
        chan = transport.open_session(timeout=timeout)
        chan.exec_command(command)
        chan.shutdown_write()  # the command reads EOF from stdin
    except SSH_DOWN as exc:
        raise SSHConnectError(host, f"cannot start remote command: {exc}") from exc
    return chan


def wait_readable(chan: paramiko.Channel, timeout: float) -> None:
    if chan.eof_received:
        # All output is in; only the exit status may still be on its way.
        chan.status_event.wait(timeout)
    else:
        select.select([chan], [], [], timeout)


def exit_status_of(chan: paramiko.Channel) -> int | None:
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
        chan = open_exec(active, target.host, remote_command(argv, env), connect_timeout)
        out, err = _Capture(max_output, keep), _Capture(max_output, keep)
        pgid = PgidReader()
        timed_out = False
        while True:
            if chan.recv_ready():
                out.feed(pgid.feed(chan.recv(READ_CHUNK)))
                continue
            if chan.recv_stderr_ready():
                err.feed(chan.recv_stderr(READ_CHUNK))
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
            wait_readable(chan, min(remaining, 0.5))
        duration = time.monotonic() - started
        status = None if timed_out else exit_status_of(chan)
        if timed_out:
            log.warning("%s: %s timed out after %.1f s", target.host, argv[0], timeout)
            if pgid.pgid is not None:
                try:
                    kill_remote_group(active, target, pgid.pgid, kill_grace_s, connect_timeout)
                except SSHError as exc:  # e.g. the host went away; the timeout is the result
                    log.warning("%s", exc)
            else:
                log.warning("%s: no pgid received; cannot kill %s", target.host, argv[0])
        with contextlib.suppress(*SSH_DOWN):  # the host may be gone already: the result stands
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
