"""A real OpenSSH sshd on a private port with generated keys, for tests and benches.

    with TestSshd() as server:
        run(SSHTarget(server.user, server.host, server.port, server.key_path,
                      server.host_key_line), ["true"], timeout=5)

`argv_prefix` lets a test start it elsewhere, e.g. `["ip", "netns", "exec", ns.name]` with
`host=ns.peer_addr`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.ports import free_port

if TYPE_CHECKING:
    from collector.remote.connect import SSHTarget

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")


def available() -> tuple[bool, str]:
    """Whether a test sshd can run here, and if not, why."""
    if not Path(SSHD).exists():
        return False, f"{SSHD} missing; apt install openssh-server"
    if shutil.which("ssh-keygen") is None:
        return False, "ssh-keygen missing; apt install openssh-client"
    if os.geteuid() != 0:
        # Non-root sshd can only log in as its own user and needs no privsep dir; we test the
        # production shape (key login to a real account), which needs root.
        return False, "the test sshd needs root (it logs users in by key)"
    return True, ""


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


class TestSshd:
    """One sshd process (`sshd -D -e -f config`) and the keys to log into it.

    Attributes: host, port, user ("root"), key_path (private user key), host_key_line
    (`ssh-ed25519 AAAA...`), pid, workdir, log_path.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        argv_prefix: Sequence[str] = (),
        start_timeout_s: float = 10.0,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = port or 0
        self.user = "root"
        self.argv_prefix = list(argv_prefix)
        self.start_timeout_s = start_timeout_s
        self.workdir = Path(tempfile.mkdtemp(prefix="freezewatch-sshd-"))
        self.key_path = self.workdir / "id_ed25519"
        self.host_key_path = self.workdir / "ssh_host_ed25519_key"
        self.config_path = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self.home = self.workdir / "home"
        self.home.mkdir()
        self.process: subprocess.Popen[bytes] | None = None
        self.host_key_line = ""

    @property
    def pid(self) -> int:
        assert self.process is not None, "sshd not started"
        return self.process.pid

    @property
    def public_key_line(self) -> str:
        """The user's public key as in authorized_keys."""
        return (self.workdir / "id_ed25519.pub").read_text().strip()

    def target(self, *, trusted: bool = True) -> SSHTarget:
        """The collector's view of this server (host key stored unless `trusted` is False)."""
        from collector.remote.connect import SSHTarget

        return SSHTarget(
            user=self.user,
            host=self.host,
            port=self.port,
            key_path=self.key_path,
            known_host_key=self.host_key_line if trusted else None,
        )

    def _write_config(self) -> None:
        self.config_path.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.host}",
                    f"HostKey {self.host_key_path}",
                    f"PidFile {self.workdir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.workdir / 'authorized_keys'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "AllowTcpForwarding yes",
                    "X11Forwarding no",
                    "PrintMotd no",
                    "UseDNS no",
                    # Tests open many short connections in parallel.
                    "MaxStartups 100:30:200",
                    "MaxSessions 64",
                    "LogLevel VERBOSE",
                    # Sessions get a home of their own: root's login files (a pyenv init that
                    # rehashes under a lock, say) stay out of the test host. A test that freezes
                    # or kills the host's processes mid-login would otherwise leave that lock
                    # held, and every later login would wait for it.
                    f"SetEnv HOME={self.home}",
                    "",
                ]
            )
        )

    def start(self) -> TestSshd:
        """Generate keys, write the config, start sshd and wait until it sends its banner."""
        ok, reason = available()
        if not ok:
            raise RuntimeError(reason)
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        _keygen(self.host_key_path, "freezewatch-test-host")
        _keygen(self.key_path, "freezewatch-test-user")
        shutil.copyfile(self.workdir / "id_ed25519.pub", self.workdir / "authorized_keys")
        key_type, key_b64 = self.host_key_path.with_suffix(".pub").read_text().split()[:2]
        self.host_key_line = f"{key_type} {key_b64}"
        last_log = ""
        for _ in range(3):
            self.port = self.requested_port or free_port(
                self.host if not self.argv_prefix else "127.0.0.1"
            )
            self._write_config()
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [*self.argv_prefix, SSHD, "-D", "-e", "-f", str(self.config_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            if self._wait_ready():
                return self
            last_log = self.log_path.read_text(errors="replace")[-2000:]
            self.stop()
            if self.requested_port:
                break
        raise RuntimeError(f"sshd did not start on {self.host}:{self.port}:\n{last_log}")

    def restart(self) -> TestSshd:
        """Start sshd again with the same keys, config and port (the host came back up)."""
        self.stop()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*self.argv_prefix, SSHD, "-D", "-e", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if not self._wait_ready():
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"sshd did not restart on {self.host}:{self.port}:\n{tail}")
        return self

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), timeout=1.0) as sock,
            ):
                if sock.recv(64).startswith(b"SSH-"):
                    return True
            time.sleep(0.05)
        return False

    def sigstop(self) -> None:
        """Freeze the listening sshd: TCP connects still complete, but no banner comes."""
        os.kill(self.pid, signal.SIGSTOP)

    def sigcont(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the listener (sessions already open keep their own processes)."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)

    def close(self) -> None:
        """Stop and remove the keys and config."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> TestSshd:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
