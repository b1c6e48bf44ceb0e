"""The real agent process → the real collector process over HTTP, on SQLite and PostgreSQL.

Every kernel line and sample arrives exactly once, through a collector outage and an agent
``kill -9`` with restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from collector import db
from collector.hosts import registry as hosts
from collector.models import Line, Sample
from tests.support.fleet import CollectorProcess

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
HOST = "spark-int"
# The collector is down this long while the kernel keeps logging and the agent keeps sampling.
OUTAGE_S = 30.0
RECORDS = 300

pytestmark = pytest.mark.timeout(180)


def start_agent(
    collector: CollectorProcess, token: str, tmp_path: Path, *extra: str
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZEWATCH_AGENT_TOKEN": token}
    cmd = [
        sys.executable, "-m", "agent", "--collector", collector.url, "--host-name", HOST,
        "--interval", "0.2", "--proc-root", str(FIXTURES / "proc"),
        "--kmsg", str(tmp_path / "kmsg"), "--state-dir", str(tmp_path / "state"),
        "--no-gpu", "--container-label", "", "--canary-interval", "0", "--timeout", "2",
        "--pstore-dir", str(tmp_path / "pstore"), *extra,
    ]  # fmt: skip
    log = open(tmp_path / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)


def append(path: Path, kseqs: range) -> None:
    with open(path, "ab") as f:
        for k in kseqs:
            f.write(b"6,%d,%d,-;integration record %d\n SUBSYSTEM=test\n" % (k, 1000 + k, k))


class Store:
    """Read-only views of what the collector stored."""

    def __init__(self, url: str) -> None:
        self.engine = db.make_engine(url)

    def kseqs(self) -> list[int]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(Line.kseq).where(Line.source == "kmsg").order_by(Line.kseq))
            return [r[0] for r in rows]

    def sample_seqs(self) -> list[int]:
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(select(Sample.seq).order_by(Sample.seq))]

    def line_rows(self) -> tuple[int, int]:
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(Line)).scalar_one()
            distinct = conn.execute(select(func.count(func.distinct(Line.seq)))).scalar_one()
            return total, distinct


def wait_for(condition, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_agent_to_collector_exactly_once_through_outage_and_kill(
    db_url: str, tmp_path: Path
) -> None:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        _host, token = hosts.create_host(session, name=HOST)
    engine.dispose()
    collector = CollectorProcess(
        db_url, tmp_path / "collector.log", FREEZEWATCH_RUN_SCHEDULER="false"
    )
    collector.start()
    store = Store(db_url)
    kmsg = tmp_path / "kmsg"
    append(kmsg, range(0, 50))
    agents = [start_agent(collector, token, tmp_path)]
    try:
        wait_for(lambda: len(store.kseqs()) == 50 and len(store.sample_seqs()) >= 3)

        # collector down while the kernel keeps logging: spooled, replayed, none twice
        collector.stop()
        for k in range(50, 150):
            append(kmsg, range(k, k + 1))
            time.sleep(OUTAGE_S / 100)
        collector.start()
        wait_for(lambda: len(store.kseqs()) == 150)

        # agent kill -9 mid-stream, restarted: no duplicate, no gap
        done = threading.Event()

        def writer() -> None:
            for k in range(150, RECORDS):
                append(kmsg, range(k, k + 1))
                time.sleep(0.01)
            done.set()

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        wait_for(lambda: len(store.kseqs()) >= 180)
        agents[0].send_signal(signal.SIGKILL)
        agents[0].wait(10)
        agents.append(start_agent(collector, token, tmp_path))
        assert done.wait(30)
        wait_for(lambda: len(store.kseqs()) == RECORDS)
        # The restarted agent's own samples (past the reserved block): under load the first
        # agent may have shipped every record before its kill, and a SIGTERM to an agent
        # still importing kills it (-15) before its handler is set.
        wait_for(lambda: any(s >= 100_000 for s in store.sample_seqs()))
        agents[1].send_signal(signal.SIGTERM)
        assert agents[1].wait(30) == 0
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait(10)
        collector.stop()
    assert store.kseqs() == list(range(RECORDS))  # every kernel record once, no gap
    total, distinct = store.line_rows()
    assert total == distinct == RECORDS
    seqs = store.sample_seqs()
    assert len(seqs) == len(set(seqs))
    first_run = [s for s in seqs if s < 100_000]  # the restart continues past a reserved block
    assert first_run == list(range(1, len(first_run) + 1))  # no sample lost or doubled
    assert len(first_run) >= OUTAGE_S / 0.2 * 0.5  # samples taken during the outage arrived
    store.engine.dispose()
