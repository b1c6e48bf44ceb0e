"""freezewatch's side: a real collector (``serve``, scheduler on) on SQLite or on a fresh
database of the bench's throwaway PostgreSQL, and a real agent process reading /dev/kmsg or the
bench's file, with the real /proc."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench._common import add_host, free_port, spawn_collector, start_agent, wait_collector
from bench._peers_procs import Procs
from bench._peers_sinks import DbSink
from tests.support.postgres import ThrowawayPostgres, fresh_database

HOST = "bench-peers"


@dataclass
class Freezewatch:
    url: str
    db_url: str
    collector_pid: int
    agent_pid: int | None
    sink: DbSink


def database_url(backend: str, workdir: Path, pg: ThrowawayPostgres | None) -> str:
    if backend == "sqlite":
        return f"sqlite:///{workdir / 'fw.db'}"
    assert pg is not None, "PostgreSQL backend without a cluster"
    return fresh_database(pg.admin_url, prefix="fwpeers")


def start(
    procs: Procs,
    workdir: Path,
    *,
    backend: str,
    pg: ThrowawayPostgres | None,
    kmsg: Path | None,
    hosts: tuple[str, ...] = (HOST,),
    env: dict[str, str] | None = None,
) -> tuple[Freezewatch, dict[str, str]]:
    """The collector and, when ``kmsg`` is given, one agent reading it (as ``hosts[0]``).
    Returns the side and each host's token (for agents the caller starts itself)."""
    workdir.mkdir(parents=True, exist_ok=True)
    db_url = database_url(backend, workdir, pg)
    tokens = {name: add_host(db_url, name) for name in hosts}
    port = free_port()
    env = {**(env or {}), "FREEZEWATCH_BIND": "127.0.0.1"}  # whatever the caller's env says
    log = workdir / "collector.log"
    collector = procs.adopt("collector", lambda: spawn_collector(db_url, port, log, **env))
    wait_collector(procs.process(collector), port, log)
    url = f"http://127.0.0.1:{port}"
    agent_pid = None
    if kmsg is not None:
        agent_pid = start_real_agent(procs, workdir, url, tokens[hosts[0]], hosts[0], kmsg)
    return Freezewatch(url, db_url, collector, agent_pid, DbSink(db_url)), tokens


def start_real_agent(
    procs: Procs, workdir: Path, url: str, token: str, host: str, kmsg: Path
) -> int:
    """``python -m agent`` at a 1 s interval on the real /proc (no GPU, no canary)."""
    workdir = workdir / f"agent-{host}"
    extra = ("--proc-root", "/proc")
    return procs.adopt(
        f"agent-{host}", lambda: start_agent(url, token, host, workdir, kmsg=kmsg, extra=extra)
    )


def postmaster_pid(pg: ThrowawayPostgres) -> int:
    """The PostgreSQL server's pid (first line of postmaster.pid)."""
    return int((pg.data_dir / "postmaster.pid").read_text().split()[0])
