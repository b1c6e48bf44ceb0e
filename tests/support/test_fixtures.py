"""The real-component fixtures themselves: PostgreSQL, sshd, network namespaces."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from collector.remote.commands import run
from tests.support import netns as netns_support
from tests.support.netns import NetNamespace
from tests.support.postgres import drop_database, fresh_database
from tests.support.skips import require
from tests.support.sshd import TestSshd

ECHO_SERVER = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        conn.sendall(conn.recv(100).upper())
"""


def _select_one(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT 1")).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_url_works(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+psycopg://")
    assert _select_one(postgres_url) == 1


@pytest.mark.postgres
def test_fresh_database_is_empty_and_isolated(postgres_url: str) -> None:
    url = fresh_database(postgres_url)
    try:
        assert url != postgres_url
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE only_here (x int)"))
        engine.dispose()
        with sa.create_engine(postgres_url).connect() as conn:
            assert conn.execute(sa.text("SELECT to_regclass('only_here')")).scalar() is None
    finally:
        drop_database(url)
    with pytest.raises(sa.exc.OperationalError):
        _select_one(url)


@pytest.mark.postgres
def test_fresh_postgres_url_fixture(fresh_postgres_url: str, postgres_url: str) -> None:
    assert fresh_postgres_url != postgres_url
    assert _select_one(fresh_postgres_url) == 1


@pytest.mark.sshd
def test_sshd_fixture_attributes(sshd: TestSshd) -> None:
    assert (sshd.host, sshd.user) == ("127.0.0.1", "root")
    assert sshd.host_key_line.startswith("ssh-ed25519 AAAA")
    assert len(sshd.host_key_line.split()) == 2
    assert sshd.key_path.exists() and sshd.pid > 0
    with socket.create_connection((sshd.host, sshd.port), timeout=5) as sock:
        assert sock.recv(64).startswith(b"SSH-2.0-OpenSSH")


@pytest.mark.sshd
def test_private_sshd_stop(private_sshd: TestSshd) -> None:
    pid = private_sshd.pid
    private_sshd.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped by stop()
    with pytest.raises(OSError):
        socket.create_connection((private_sshd.host, private_sshd.port), timeout=2)


def _exchange(addr: str, port: int, timeout: float = 3.0) -> bytes:
    with socket.create_connection((addr, port), timeout=timeout) as sock:
        sock.sendall(b"ping")
        return sock.recv(100)


def _start_echo(ns: NetNamespace, port: int) -> subprocess.Popen[str]:
    proc = ns.run_in_ns(
        [sys.executable, "-c", ECHO_SERVER, ns.peer_addr, str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


@pytest.mark.netns
def test_netns_tcp_and_link_down(netns: NetNamespace) -> None:
    _start_echo(netns, 7001)
    assert _exchange(netns.peer_addr, 7001) == b"PING"
    netns.link_down()
    with pytest.raises(OSError):  # packets are dropped: a timeout, like a frozen host
        _exchange(netns.peer_addr, 7001, timeout=0.5)
    netns.link_up()
    deadline = time.monotonic() + 10
    while True:  # the link needs a moment to carry traffic again
        try:
            assert _exchange(netns.peer_addr, 7001) == b"PING"
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.netns
def test_netns_reaches_root_side(netns: NetNamespace) -> None:
    with socket.create_server((netns.host_addr, 0)) as srv:
        port = srv.getsockname()[1]
        connect = f"import socket; socket.create_connection(({netns.host_addr!r}, {port}), 3)"
        result = netns.run([sys.executable, "-c", connect])
        assert result.returncode == 0, result.stderr
        conn, peer = srv.accept()
        conn.close()
        assert peer[0] == netns.peer_addr


@pytest.mark.netns
@pytest.mark.sshd
def test_sshd_inside_namespace(netns: NetNamespace) -> None:
    with TestSshd(host=netns.peer_addr, argv_prefix=netns.ns_argv([])) as server:
        result = run(server.target(), ["cat", "/proc/net/dev"], timeout=20)
        assert result.exit_status == 0
        assert netns.peer_if.encode() in result.stdout  # the command ran in the namespace
        assert server.pid in netns.pids()


@pytest.mark.netns
def test_netns_cleanup_always() -> None:
    require(netns_support.available(), "needs root and a working `ip netns`")
    ns = NetNamespace()
    with pytest.raises(RuntimeError, match="boom"), ns:
        name, host_if = ns.name, ns.host_if
        sleeper = ns.run_in_ns(["sleep", "300"])
        raise RuntimeError("boom")
    assert sleeper.poll() is not None
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert name not in names.split()
    link = subprocess.run(["ip", "link", "show", host_if], capture_output=True, text=True)
    assert link.returncode != 0
    assert ns.index is None
