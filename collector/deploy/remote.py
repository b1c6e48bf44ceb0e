"""The host side of a deploy: what the host is (user, python3, systemd), reading and writing
files and running commands there, as root or through ``sudo -n``. Every command is an argv
list, quoted on the way (``collector.remote``); each one run is kept for the report.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collector.deploy.layout import RemoteFile
from collector.errors import AppError
from collector.remote.connect import SSHError, SSHTarget
from collector.remote.ssh import SSHClient
from collector.remote.upload import put_command

COMMAND_TIMEOUT_S = 60.0
# One round trip for the facts a deploy depends on.
_FACTS = (
    'echo "uid=$(id -u)"; py=$(command -v python3 || true); echo "python3=$py"; '
    '[ -n "$py" ] && echo "python_version=$("$py" -c '
    '\'import sys; print("%d.%d" % sys.version_info[:2])\')"; '
    "[ -d /run/systemd/system ] && echo systemd=yes || echo systemd=no; "
    "sudo -n true 2>/dev/null && echo sudo=yes || echo sudo=no"
)
# sha256 of each existing file among the arguments (to report what a deploy changed).
_HASHES = 'for f; do [ -f "$f" ] && sha256sum "$f"; done; exit 0'
_REMOVE = 'for f; do if [ -e "$f" ]; then rm -f "$f" && echo "$f"; fi; done; exit 0'
_RMDIR = 'for d; do [ -d "$d" ] && rmdir "$d" 2>/dev/null && echo "$d"; done; exit 0'


class DeployFailed(AppError):
    """The host refused a step (no python3, no sudo, a failing command, SSH down)."""

    status_code = 502


@dataclass
class RemoteHost:
    """A host being deployed to: the SSH layer, the target, and what was run there."""

    ssh: SSHClient
    target: SSHTarget
    sudo: tuple[str, ...] = ()
    commands: list[str] = field(default_factory=list)

    def _run(self, argv: Sequence[str], *, check: bool = True) -> str:
        self.commands.append(shlex.join(argv))
        try:
            result = self.ssh.run(self.target, argv, timeout=COMMAND_TIMEOUT_S)
        except SSHError as exc:
            raise DeployFailed(f"SSH to {self.target.address} failed: {exc}") from None
        if check and not result.ok:
            detail = result.stderr.decode(errors="replace").strip()[-500:]
            status = "timed out" if result.timed_out else f"exit {result.exit_status}"
            raise DeployFailed(f"`{shlex.join(argv)}` failed on the host ({status}): {detail}")
        return result.stdout.decode(errors="replace")

    def facts(self) -> dict[str, Any]:
        """uid, python3 (path), python_version, systemd and sudo, as the host says them."""
        out = self._run(["sh", "-c", _FACTS])
        facts = {}
        for line in out.splitlines():
            key, _, value = line.partition("=")
            facts[key] = value
        if facts.get("uid") != "0":
            if facts.get("sudo") != "yes":
                raise DeployFailed(
                    f"{self.target.user} is not root and `sudo -n` asks for a password: allow "
                    "it passwordless for this user, or log in as root"
                )
            self.sudo = ("sudo", "-n")
        return {
            "user": self.target.user,
            "root": facts.get("uid") == "0",
            "python3": facts.get("python3") or None,
            "python_version": facts.get("python_version") or None,
            "systemd": facts.get("systemd") == "yes",
        }

    def run(self, argv: Sequence[str], *, check: bool = True) -> str:
        """Run ``argv`` with root's rights (``sudo -n`` unless logged in as root)."""
        return self._run([*self.sudo, *argv], check=check)

    def read(self, path: str) -> str | None:
        """A file's text, or None when it is not there."""
        out = self.run(["sh", "-c", '[ -f "$1" ] && cat "$1" || true', "freezewatch-read", path])
        return out or None

    def hashes(self, paths: Sequence[str]) -> dict[str, str]:
        out = self.run(["sh", "-c", _HASHES, "freezewatch-hash", *paths])
        return {
            path: digest
            for digest, _, path in (line.partition("  ") for line in out.splitlines())
            if path
        }

    def put(self, file: RemoteFile) -> None:
        argv = put_command(file.path, mode=file.mode, dir_mode=file.dir_mode, sudo=self.sudo)
        self.commands.append(shlex.join(argv) + f" < ({len(file.data)} bytes)")
        try:
            self.ssh.put_file(
                self.target,
                file.path,
                file.data,
                mode=file.mode,
                dir_mode=file.dir_mode,
                sudo=self.sudo,
            )
        except SSHError as exc:
            raise DeployFailed(str(exc)) from None

    def remove(self, paths: Sequence[str], dirs: Sequence[str]) -> list[str]:
        """Remove the files that exist, then the directories left empty; returns what went."""
        gone = self.run(["sh", "-c", _REMOVE, "freezewatch-rm", *paths]).split()
        return gone + self.run(["sh", "-c", _RMDIR, "freezewatch-rmdir", *dirs]).split()
