"""SSH connections with pinned host keys: the collector never trusts a key by itself.

``connect`` verifies the server's host key against the one stored for the host and refuses
unknown or different keys (``HostKeyUnknown``, ``HostKeyMismatch``); trust on first use is an
explicit, separate step (``fetch_host_key``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

import paramiko

log = logging.getLogger(__name__)


DEFAULT_CONNECT_TIMEOUT_S = 10.0
# What a connection that drops raises: paramiko re-raises its transport's EOFError from
# open_session, exec_command and open_channel when the host goes away mid-call (a reboot).
SSH_DOWN = (paramiko.SSHException, OSError, EOFError)


class _CallersSayIt(logging.Filter):
    """paramiko's transport thread logs a failure it also raises to its caller as ERRORs: a
    refused channel, or a banner that never came followed by its traceback a line at a time
    (25 records for each SSH probe of a frozen host). Our callers report the same failure in
    their own words, so paramiko's copy is a DEBUG record, kept only when debugging."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger("paramiko.transport").addFilter(_CallersSayIt())


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
    except SSH_DOWN as exc:
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
    except SSH_DOWN as exc:
        raise SSHConnectError(host, f"no host key from {host}:{port}: {exc}") from exc
    finally:
        transport.close()
    return key_line(key), fingerprint(key)
