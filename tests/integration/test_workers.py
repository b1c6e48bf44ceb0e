"""``serve --workers 2`` on a real PostgreSQL: one collector made of two processes on one port.

- It comes up as one collector: the admin token generated and printed once, one collector
  start (the second worker joins), netconsole bound once (a second bind would stop it).
- The kernel spreads connections over both workers, and ingest through them is exactly once.
- A worker killed (-9) is started again, joining; the port answers throughout.
- SIGTERM stops every worker gracefully: their runs end, no process is left.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from agent.wire import INGEST_PATH
from collector import db
from collector.models import CollectorRun, Line
from tests.support.fleet import register
from tests.support.ports import free_port
from tests.support.postgres import drop_database, fresh_database
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]
CONNECTIONS = 16  # spread by a hash: all on one of two workers by chance 1 in 32,768
SCRAPES = 10  # requests that would all miss a worker by chance 1 in 512


@pytest.fixture
def pg(postgres_url: str) -> Iterator[str]:
    url = fresh_database(postgres_url)
    yield url
    drop_database(url)


def runs(db_url: str) -> list[tuple[int, bool, bool]]:
    """(pid, joined, stopped) of every collector start, oldest first."""
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(CollectorRun.pid, CollectorRun.joined, CollectorRun.stopped_at).order_by(
                    CollectorRun.id
                )
            ).all()
            return [(pid, joined, stopped is not None) for pid, joined, stopped in rows]
    finally:
        engine.dispose()


def stored(db_url: str) -> tuple[int, int]:
    """(rows, distinct kseqs) of the kernel lines stored."""
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            n, distinct = conn.execute(
                select(func.count(), func.count(func.distinct(Line.kseq)))
            ).one()
            return int(n), int(distinct)
    finally:
        engine.dispose()


def batch(first: int, count: int) -> dict[str, object]:
    return {
        "host": "spark-w",
        "boot_id": "boot-w",
        "agent": {"version": "test", "pid": 1},
        "lines": [
            {"seq": s, "ts": 1764400000.0 + s, "source": "kmsg", "priority": 6, "kseq": s,
             "text": f"NVRM: worker test line {s}"}
            for s in range(first, first + count)
        ],
    }  # fmt: skip


def established(port: int) -> set[str]:
    """Socket inodes of the connections accepted on ``port`` (server side)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                inodes.add(fields[9])
    return inodes


def connections_of(pid: int, inodes: set[str]) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            count += 1
    return count


def scraped(url: str) -> tuple[float, float, float]:
    """(kernel lines stored, freezewatch_leader, worker restarts) as one scrape of /metrics
    says."""
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(url + "/metrics").text)}
    lines = next(
        s.value
        for s in families["freezewatch_ingest_records"].samples
        if s.name.endswith("_total") and s.labels == {"stream": "lines", "outcome": "stored"}
    )
    (restarts,) = [
        s.value
        for s in families["freezewatch_worker_restarts"].samples
        if s.name.endswith("_total")
    ]
    return lines, families["freezewatch_leader"].samples[0].value, restarts


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_two_workers_serve_as_one_collector(pg: str, tmp_path: Path) -> None:
    token = register(pg, ["spark-w"])["spark-w"]
    port, udp = free_port(), free_port()
    log = tmp_path / "collector.log"
    env = {
        **os.environ,
        "FREEZEWATCH_DB_URL": pg,
        "FREEZEWATCH_PORT": str(port),
        "FREEZEWATCH_NETCONSOLE_BIND": f"127.0.0.1:{udp}",
    }
    env.pop("FREEZEWATCH_ADMIN_TOKEN", None)  # generated on the first start: printed once
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "collector", "serve", "--workers", "2",
             "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"}
    try:
        started = wait_for(lambda: len(runs(pg)) == 2 and runs(pg), 60, 0.2, what="two workers")
        assert [joined for _pid, joined, _ in started] == [False, True]  # one collector start
        pids = [pid for pid, _, _ in started]
        assert proc.pid not in pids and all(alive(p) for p in pids)
        tokens = re.findall(r"generated admin token \(shown once\): (\S+)", log.read_text())
        assert len(tokens) == 1
        admin = {"Authorization": f"Bearer {tokens[0]}"}

        # Connections over both workers; every batch stored once, a replay counted duplicate.
        clients = [httpx.Client(base_url=url, timeout=30) for _ in range(CONNECTIONS)]
        try:
            for i, client in enumerate(clients):
                r = client.post(INGEST_PATH, json=batch(i * 10, 10), headers=auth)
                assert r.status_code == 200 and r.json()["stored"]["lines"] == 10
            inodes = established(port)
            spread = [connections_of(pid, inodes) for pid in pids]
            assert sum(spread) == CONNECTIONS and min(spread) > 0, spread
            replay = clients[-1].post(INGEST_PATH, json=batch(0, 10), headers=auth)
            assert replay.json()["duplicates"]["lines"] == 10
        finally:
            for client in clients:
                client.close()
        assert stored(pg) == (CONNECTIONS * 10, CONNECTIONS * 10)

        # Whichever worker answers a scrape, it counts what every worker stored.
        for _ in range(SCRAPES):  # a connection each: the kernel picks the worker
            assert scraped(url) == (CONNECTIONS * 10 + 0.0, 1.0, 0.0)

        # The netconsole receiver runs (in one worker: a second bind would have stopped it),
        # and every worker reports its figures.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"4,1,1,-;stranger line", ("127.0.0.1", udp))
        time.sleep(2.5)  # counted, then published (every second)
        for _ in range(SCRAPES):
            figures = httpx.get(url + "/api/v1/netconsole", headers=admin).json()
            assert figures["enabled"] and figures["unknown_datagrams"] == 1, figures

        # A worker killed is started again, joining; the port answers throughout.
        os.kill(pids[1], signal.SIGKILL)
        wait_for(lambda: len(runs(pg)) == 3, 60, 0.2, what="the worker started again")
        replaced = runs(pg)[2]
        assert replaced[1] is True and replaced[0] not in pids and proc.poll() is None
        r = httpx.post(url + INGEST_PATH, json=batch(1000, 5), headers=auth, timeout=30)
        assert r.status_code == 200 and r.json()["stored"]["lines"] == 5
        pids = [pids[0], replaced[0]]
        # Counted once, whichever worker answers (a scrape that can alert on a crash loop).
        for _ in range(SCRAPES):
            assert scraped(url) == (CONNECTIONS * 10 + 5.0, 1.0, 1.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()[-3000:]
    assert not any(alive(pid) for pid in pids)
    final = runs(pg)
    assert [stopped for _pid, _joined, stopped in final] == [True, False, True]  # -9: no stop
    assert stored(pg) == (CONNECTIONS * 10 + 5, CONNECTIONS * 10 + 5)
