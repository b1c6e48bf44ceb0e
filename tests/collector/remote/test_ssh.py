"""collector.remote.ssh against a real OpenSSH sshd (tests.support.sshd)."""

from __future__ import annotations

import http.server
import json
import logging
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import paramiko
import pytest

from collector.remote.commands import remote_command, run
from collector.remote.connect import (
    HostKeyMismatch,
    HostKeyUnknown,
    SSHConnectError,
    SSHTarget,
    connect,
    fetch_host_key,
    fingerprint,
    parse_key_line,
)
from collector.remote.forward import forward_local_port
from collector.remote.process import start_group
from tests.support.sshd import TestSshd

pytestmark = pytest.mark.sshd


def _marker() -> str:
    return f"fwmark{uuid.uuid4().hex[:12]}"


def _survivors(marker: str) -> list[str]:
    """Processes whose command line carries `marker` (sshd runs on this machine)."""
    out = subprocess.run(["pgrep", "-a", "-f", marker], capture_output=True, text=True)
    return out.stdout.splitlines()


def _wait_gone(marker: str, timeout_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := _survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _sleeper(marker: str, seconds: int = 300) -> str:
    """Shell words for a sleeping process whose command line carries `marker`."""
    return f"python3 -c 'import time; time.sleep({seconds})' {marker}"


def _ssh_keygen_fingerprint(server: TestSshd) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(server.host_key_path.with_suffix(".pub"))],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[1]


def test_argv_arrives_verbatim(sshd: TestSshd) -> None:
    tricky = ["a b", "it's", '"dq"', "x; touch /tmp/pwned-fw", "$(id)", "`id`", "*", "", "\\n"]
    result = run(
        sshd.target(),
        ["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *tricky],
        timeout=20,
    )
    assert result.exit_status == 0, result.stderr
    assert json.loads(result.stdout) == tricky
    assert not result.timed_out and not result.truncated


def test_exit_status_stdout_and_stderr(sshd: TestSshd) -> None:
    result = run(sshd.target(), ["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=20)
    assert (result.stdout, result.stderr, result.exit_status) == (b"out\n", b"err\n", 7)
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 7")
    assert not result.ok


def test_a_connection_dying_as_a_command_starts_is_a_connect_error(
    sshd: TestSshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """paramiko re-raises its transport's EOFError from open_session when the host goes away
    mid-call (a campaign's reboot did): an SSHConnectError the matrix handles, not a crash."""

    def dropped(*_args: object, **_kwargs: object) -> None:
        raise EOFError()

    monkeypatch.setattr(paramiko.Transport, "open_session", dropped)
    with pytest.raises(SSHConnectError, match="cannot start remote command"):
        run(sshd.target(), ["true"], timeout=20)


def test_a_connection_dying_as_a_command_ends_keeps_its_result(
    sshd: TestSshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    close = paramiko.Channel.close

    def close_then_drop(chan: paramiko.Channel) -> None:
        close(chan)
        raise EOFError()  # what closing a channel of a transport that just died raises

    monkeypatch.setattr(paramiko.Channel, "close", close_then_drop)
    result = run(sshd.target(), ["sh", "-c", "echo done"], timeout=20)
    assert (result.stdout, result.exit_status) == (b"done\n", 0)


def test_closing_a_process_whose_connection_just_died_is_quiet(
    sshd: TestSshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = start_group(sshd.target(), ["sh", "-c", "echo up"])
    assert proc.wait(20) == 0
    close = paramiko.Channel.close

    def close_then_drop(chan: paramiko.Channel) -> None:
        close(chan)
        raise EOFError()

    monkeypatch.setattr(paramiko.Channel, "close", close_then_drop)
    proc.close()  # a campaign closes its server's process after the host rebooted


def test_env_is_passed_as_argv(sshd: TestSshd) -> None:
    result = run(sshd.target(), ["sh", "-c", 'echo "$FW_X"'], env={"FW_X": "a b;c"}, timeout=20)
    assert result.stdout == b"a b;c\n"
    with pytest.raises(ValueError):
        remote_command(["true"], env={"BAD NAME": "x"})


def test_output_is_capped_keeping_the_tail(sshd: TestSshd) -> None:
    script = "for i in $(seq 1 20000); do echo line$i; done"
    result = run(sshd.target(), ["sh", "-c", script], timeout=30, max_output=1000)
    assert result.truncated
    assert len(result.stdout) == 1000
    assert result.stdout.endswith(b"line20000\n")
    head = run(sshd.target(), ["sh", "-c", script], timeout=30, max_output=100, keep="head")
    assert head.stdout.startswith(b"line1\nline2\n") and len(head.stdout) == 100


def test_timeout_kills_the_remote_group(sshd: TestSshd) -> None:
    marker = _marker()
    # A child in the background and one in the foreground: both must die.
    script = f"{_sleeper(marker)} & exec {_sleeper(marker)}"
    result = run(sshd.target(), ["sh", "-c", script, marker], timeout=1.0, kill_grace_s=1.0)
    assert result.timed_out and result.exit_status is None
    assert _wait_gone(marker) == []


def test_timeout_escalates_to_sigkill(sshd: TestSshd) -> None:
    marker = _marker()
    script = f"trap '' TERM; {_sleeper(marker)} & wait; wait"
    result = run(sshd.target(), ["sh", "-c", script, marker], timeout=1.0, kill_grace_s=0.5)
    assert result.timed_out
    assert _wait_gone(marker) == []


def test_unknown_host_key_is_refused(sshd: TestSshd) -> None:
    with pytest.raises(HostKeyUnknown) as info:
        connect(sshd.target(trusted=False), timeout=10)
    assert info.value.fingerprint == _ssh_keygen_fingerprint(sshd)
    assert info.value.offered_key_line == sshd.host_key_line
    assert info.value.host == sshd.host


def test_mismatched_host_key_is_refused(sshd: TestSshd) -> None:
    other = paramiko.Ed25519Key.from_private_key_file(str(sshd.key_path))  # a different key
    wrong = f"{other.get_name()} {other.get_base64()}"
    target = SSHTarget(sshd.user, sshd.host, sshd.port, sshd.key_path, known_host_key=wrong)
    with pytest.raises(HostKeyMismatch) as info:
        run(target, ["true"], timeout=10)
    assert info.value.fingerprint == _ssh_keygen_fingerprint(sshd)
    assert info.value.expected_fingerprint == fingerprint(other)


def test_mismatched_key_type_is_refused(sshd: TestSshd) -> None:
    rsa = paramiko.RSAKey.generate(1024)
    target = SSHTarget(
        sshd.user, sshd.host, sshd.port, sshd.key_path, known_host_key=f"ssh-rsa {rsa.get_base64()}"
    )
    with pytest.raises(HostKeyMismatch):
        connect(target, timeout=10)


def test_fetch_host_key_then_trust(sshd: TestSshd) -> None:
    line, fp = fetch_host_key(sshd.host, sshd.port, timeout=10)
    assert line == sshd.host_key_line
    assert fp == _ssh_keygen_fingerprint(sshd) == fingerprint(parse_key_line(line))
    target = SSHTarget(sshd.user, sshd.host, sshd.port, sshd.key_path, known_host_key=line)
    assert run(target, ["cat", "/proc/sys/kernel/random/boot_id"], timeout=10).exit_status == 0


def test_wrong_user_key_is_a_connect_error(sshd: TestSshd, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    target = SSHTarget(sshd.user, sshd.host, sshd.port, stranger, sshd.host_key_line)
    with pytest.raises(SSHConnectError, match="authentication"):
        connect(target, timeout=10)


def test_frozen_sshd_times_out_on_banner(
    private_sshd: TestSshd, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="paramiko.transport")
    private_sshd.sigstop()
    try:
        with pytest.raises(SSHConnectError):
            connect(private_sshd.target(), timeout=0.5)
        # paramiko's own thread logs the failure too, a moment later: as DEBUG, not ERROR
        # (each probe of a frozen host logged a 25-line ERROR traceback)
        deadline = time.monotonic() + 10
        while not any("banner" in r.getMessage() for r in paramiko_records(caplog)):
            assert time.monotonic() < deadline, "paramiko never logged the banner failure"
            time.sleep(0.05)
    finally:
        private_sshd.sigcont()
    assert [r for r in paramiko_records(caplog) if r.levelno >= logging.WARNING] == []
    assert run(private_sshd.target(), ["true"], timeout=10).exit_status == 0


def paramiko_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("paramiko")]


def test_start_group_streams_lines_and_kill_leaves_no_survivor(sshd: TestSshd) -> None:
    marker = _marker()
    lines: list[str] = []
    errors: list[str] = []
    got_ready = threading.Event()

    def on_stdout(line: str) -> None:
        lines.append(line)
        if line == "ready":
            got_ready.set()

    script = (
        f"echo hello; echo oops >&2; {_sleeper(marker)} & {_sleeper(marker)} & echo ready; wait"
    )
    with start_group(
        sshd.target(), ["sh", "-c", script, marker], on_stdout=on_stdout, on_stderr=errors.append
    ) as proc:
        assert got_ready.wait(10)
        assert proc.running and proc.pgid > 1
        assert len(_survivors(marker)) >= 2
        proc.kill_group(grace_s=1.0)
        assert not proc.running
    assert lines == ["hello", "ready"]
    assert errors == ["oops"]
    assert _wait_gone(marker) == []


def test_start_group_wait_returns_exit_status(sshd: TestSshd) -> None:
    lines: list[str] = []
    proc = start_group(
        sshd.target(), ["sh", "-c", "printf 'a\\nb'; exit 3"], on_stdout=lines.append
    )
    try:
        assert proc.wait(10) == 3
    finally:
        proc.close()
    assert lines == ["a", "b"]


def test_close_kills_a_running_group(sshd: TestSshd) -> None:
    marker = _marker()
    proc = start_group(sshd.target(), ["sh", "-c", f"exec {_sleeper(marker)}"])
    deadline = time.monotonic() + 5
    while not _survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(marker)
    proc.close()
    assert _wait_gone(marker) == []


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(port: int = 0) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_server() -> Iterator[int]:
    with serving() as port:
        yield port


def test_port_forward_reaches_a_server_behind_sshd(sshd: TestSshd, http_server: int) -> None:
    local_port, close = forward_local_port(sshd.target(), "127.0.0.1", http_server)
    try:
        assert local_port != http_server
        for path in ("/health", "/v1/models"):
            url = f"http://127.0.0.1:{local_port}{path}"
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.read() == f"hello {path}".encode()
    finally:
        close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{local_port}/health", timeout=2)


def test_closing_a_forward_whose_connection_died_raises_nothing(
    sshd: TestSshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tunnel still open when its host freezes: closing its channel raises EOFError (what
    paramiko's packetizer raises once the transport's socket is gone), which the closer must
    swallow, not pass to the matrix run that stops the forward."""
    # To sshd's own port: the connection stays open after its banner, as a tunnel to a vLLM
    # server does while a request is under way.
    local_port, close = forward_local_port(sshd.target(), sshd.host, sshd.port)
    with socket.create_connection(("127.0.0.1", local_port), timeout=10) as conn:
        assert conn.recv(4096).startswith(b"SSH-2.0-")  # its channel is open now

        def dead(_self: paramiko.Channel) -> None:
            raise EOFError

        monkeypatch.setattr(paramiko.Channel, "close", dead)
        close()  # raised EOFError before


def test_a_forward_to_a_port_nobody_listens_on_yet_says_so_once(
    sshd: TestSshd, caplog: pytest.LogCaptureFixture
) -> None:
    """A matrix run polls vLLM's port through a forward while the model loads: every refused
    try used to log an ERROR (paramiko) and a WARNING (ours), four times a second."""
    with serving() as port:
        pass  # a port that was free a moment ago: refused until served again below
    caplog.set_level(logging.DEBUG)
    local_port, close = forward_local_port(sshd.target(), "127.0.0.1", port)
    url = f"http://127.0.0.1:{local_port}/health"
    try:
        for _ in range(5):
            with pytest.raises(OSError):
                urllib.request.urlopen(url, timeout=10)
        with serving(port), urllib.request.urlopen(url, timeout=10) as response:
            assert response.read() == b"hello /health"
    finally:
        close()
    ours = [r for r in caplog.records if r.name == "collector.remote.forward"]
    assert [r.levelname for r in ours if r.levelno >= logging.INFO] == ["WARNING", "INFO"]
    assert "said once" in ours[0].getMessage() and "works again" in ours[-1].getMessage()
    assert len([r for r in ours if r.levelno == logging.DEBUG and "failed" in r.getMessage()]) == 4
    assert [r for r in paramiko_records(caplog) if r.levelno >= logging.WARNING] == []
