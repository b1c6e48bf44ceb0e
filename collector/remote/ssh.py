"""The SSH layer as one object: whoever runs things on a host is handed an ``SSHClient``.

Probes, post-mortem collection, the matrix runner and host-key trust take it as a dependency
(``SSHClient()`` in production), so a test can hand in one that records or scripts commands.
``env`` is added to every command (e.g. a PATH where ``docker`` lives).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from collector.remote import commands, connect, forward, process, upload
from collector.remote.commands import RunResult
from collector.remote.connect import DEFAULT_CONNECT_TIMEOUT_S, SSHTarget
from collector.remote.process import LineCallback, RemoteProcess


class SSHClient:
    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env or {})

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        return {**self.env, **(env or {})} or None

    def run(
        self,
        target: SSHTarget,
        argv: Sequence[str],
        *,
        timeout: float,
        max_output: int = 1 << 20,
        keep: Literal["head", "tail"] = "tail",
        env: Mapping[str, str] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> RunResult:
        """Run ``argv`` and wait at most ``timeout`` s; see ``commands.run``."""
        return commands.run(
            target,
            argv,
            timeout=timeout,
            max_output=max_output,
            keep=keep,
            env=self._env(env),
            connect_timeout=connect_timeout,
        )

    def start_group(
        self,
        target: SSHTarget,
        argv: Sequence[str],
        *,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RemoteProcess:
        """Start ``argv`` in a process group of its own, streaming its lines back."""
        return process.start_group(
            target, argv, on_stdout=on_stdout, on_stderr=on_stderr, env=self._env(env)
        )

    def put_file(
        self,
        target: SSHTarget,
        path: str,
        data: bytes,
        *,
        mode: int,
        dir_mode: int = 0o755,
        sudo: Sequence[str] = (),
        timeout: float = 120.0,
    ) -> None:
        """Write ``data`` to ``path`` (replaced whole, ``mode`` set); see ``upload.put_file``."""
        upload.put_file(
            target, path, data, mode=mode, dir_mode=dir_mode, sudo=sudo, timeout=timeout
        )

    def forward_local_port(
        self, target: SSHTarget, remote_host: str, remote_port: int
    ) -> tuple[int, Callable[[], None]]:
        """A local port tunnelled to remote_host:remote_port as the target sees it."""
        return forward.forward_local_port(target, remote_host, remote_port)

    def fetch_host_key(self, host: str, port: int, timeout: float) -> tuple[str, str]:
        """The key the server offers now, as (key line, fingerprint): trust on first use."""
        return connect.fetch_host_key(host, port, timeout)
