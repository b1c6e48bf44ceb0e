"""Shared bench plumbing: a real collector process on a throwaway database, real agents."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ADMIN = "fwa_bench-admin-_nGW6Rj8nGTHDn-ulvWQDaIQdnz8sWsf"
FIXTURE_PROC = ROOT / "tests" / "fixtures" / "proc"


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads) from /proc/<pid>/stat, in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_host(db_url: str, name: str, *, root: Path = ROOT, grace_s: float | None = None) -> str:
    """Register host ``name`` (migrating the database first); its token. From another
    checkout ``root``, with that checkout's CLI: its own migrations. ``grace_s``: its own
    grace (``add-host --grace``)."""
    if root.resolve() != ROOT:
        grace = [] if grace_s is None else ["--grace", str(grace_s)]
        out = subprocess.run(
            [sys.executable, "-m", "collector", "add-host", name, *grace],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root), "FREEZEWATCH_DB_URL": db_url},
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip().splitlines()[-1]
    from collector import db
    from collector.hosts import registry as hosts
    from collector.hosts.config import configure_host
    from collector.remote.ssh import SSHClient

    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        host, token = hosts.create_host(session, name=name)
        configure_host(session, host=host, fetch_key=SSHClient().fetch_host_key, grace_s=grace_s)
    engine.dispose()
    return token


@contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    """A fresh SQLite file under ``tmp``, or a throwaway PostgreSQL cluster."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'fw.db'}"
        return
    from tests.support.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as pg:
        yield pg.url


def spawn_collector(
    db_url: str, port: int, log: Path | None = None, *, root: Path = ROOT, **env: str
) -> subprocess.Popen[bytes]:
    """``python -m collector serve`` (scheduler on) on ``port``, not yet answering; ``root``:
    the checkout whose code it runs (another one for a before/after in one run)."""
    out = open(log, "ab") if log is not None else None  # noqa: SIM115 - lives with the process
    return subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--log-level", "warning"],
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": str(root),
            "FREEZEWATCH_DB_URL": db_url,
            "FREEZEWATCH_PORT": str(port),
            "FREEZEWATCH_ADMIN_TOKEN": ADMIN,
            **env,
        },
        stdout=out,
        stderr=out,
    )


def wait_collector(proc: subprocess.Popen[bytes], port: int, log: Path | None = None) -> None:
    """Returns once the collector on ``port`` answers /healthz; raises if it exits first or
    takes longer than a loaded 2-core machine needs (a minute or more)."""
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError(f"collector did not start\n{tail}")
        time.sleep(0.05)


def start_collector(
    db_url: str, port: int, log: Path | None = None, *, root: Path = ROOT, **env: str
) -> subprocess.Popen[bytes]:
    """``python -m collector serve`` (scheduler on) on ``port``; returns once it answers."""
    proc = spawn_collector(db_url, port, log, root=root, **env)
    try:
        wait_collector(proc, port, log)
    except BaseException:  # Ctrl-C while waiting included: the caller never got the process
        proc.kill()
        proc.wait()
        raise
    return proc


@contextmanager
def running_collector_process(
    db_url: str, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = start_collector(db_url, port, **env)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextmanager
def running_collector(db_url: str, **env: str) -> Iterator[str]:
    with running_collector_process(db_url, **env) as (url, _proc):
        yield url


def start_agent(
    url: str,
    token: str,
    host: str,
    workdir: Path,
    *,
    kmsg: Path,
    interval: float = 1.0,
    canary: bool = False,
    extra: tuple[str, ...] = (),
    root: Path = ROOT,
) -> subprocess.Popen[bytes]:
    """A real agent process on the fixture /proc, following ``kmsg`` (a plain file); from
    the checkout ``root``."""
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "agent", "--collector", url, "--token", token,
        "--host-name", host, "--interval", str(interval), "--proc-root", str(FIXTURE_PROC),
        "--kmsg", str(kmsg), "--state-dir", str(workdir / "state"), "--no-gpu",
        "--container-label", "", "--canary-interval", "10" if canary else "0",
        "--pstore-dir", str(workdir / "pstore"), "--journalctl", "false",
        "--docker-socket", str(workdir / "no-docker.sock"), *extra,
    ]  # fmt: skip
    log = open(workdir / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(cmd, cwd=root, stdout=log, stderr=log, env=dict(os.environ))
