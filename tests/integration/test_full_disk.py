"""A full disk never kills the agent nor hides a loss: the real agent with its state dir on a
2 MiB tmpfs, the real collector process, on SQLite and PostgreSQL.

1. The collector is down while the kernel logs 300 lines/s: the spool fills the disk, drops by
   priority and counts; the agent keeps running; back, the replay and one drop report arrive.
2. The agent is restarted on a disk filled to the last byte, without its state file: it starts,
   heartbeats and streams live lines.
3. The collector goes away again on that full disk: nothing can be spooled, all is counted.

Every kernel line appended is, at the end, either stored exactly once or in the drop ledger's
totals the host API shows.
"""

from __future__ import annotations

import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from collector import db
from collector.models import Line
from tests.support.fleet import CollectorProcess, append_kmsg, register, start_agent, stop_all
from tests.support.tmpfs import fill
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(300)

HOST = "spark-disk"
RATE = 300  # kernel lines a second while the collector is down


class Kernel:
    """Appends kernel records to the agent's kmsg at ``rate`` a second while running."""

    def __init__(self, kmsg: Path) -> None:
        self.kmsg, self.next = kmsg, 0
        self.rate = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            n = self.rate // 10
            if n:
                append_kmsg(self.kmsg, range(self.next, self.next + n), b"disk test " + b"x" * 120)
                self.next += n

    def write(self, n: int) -> None:
        append_kmsg(self.kmsg, range(self.next, self.next + n), b"disk test live")
        self.next += n


def kseqs(db_url: str) -> tuple[int, int]:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(func.count(), func.count(func.distinct(Line.kseq))).where(
                    Line.source == "kmsg"
                )
            ).one()
            return row[0], row[1]
    finally:
        engine.dispose()


def host(c: CollectorProcess) -> dict[str, Any]:
    return c.api(f"/api/v1/hosts/{HOST}")  # type: ignore[return-value]


def accounted(c: CollectorProcess, db_url: str, kernel: Kernel) -> bool:
    stored, _ = kseqs(db_url)
    return stored + host(c)["spool_losses"]["total"]["lines"] == kernel.next


def test_full_disk_agent_keeps_running_and_every_line_is_stored_or_counted(
    db_url: str, tmp_path: Path, small_disk: Callable[[str], Path]
) -> None:
    disk = small_disk("2m")
    state = disk / "state"
    token = register(db_url, [HOST])[HOST]
    collector = CollectorProcess(db_url, tmp_path / "collector.log")
    collector.start()
    work = tmp_path / "agent"
    extra = ("--state-dir", str(state), "--timeout", "2")
    agents = [start_agent(collector.url, token, HOST, work, interval=0.5, extra=extra)]
    kernel = Kernel(work / "kmsg")
    try:
        wait_for(lambda: host(collector)["status"] == "up", 60)

        # 1. Collector down, the kernel busy: the disk fills up.
        collector.stop(signal.SIGKILL)
        kernel.rate = RATE
        wait_for(lambda: shutil.disk_usage(disk).free < 128 * 1024, 60, 0.2)
        time.sleep(5)  # well past full: appends now drop
        kernel.rate = 0
        assert agents[0].poll() is None  # alive on a full disk
        segments = [int(p.name.split("-")[0]) for p in (state / "spool").glob("*.seg")]
        assert segments and max(segments) < kernel.next / 20  # no segment per append
        collector.start()
        wait_for(lambda: accounted(collector, db_url, kernel), 90, 0.5)
        losses = host(collector)["spool_losses"]
        assert losses["total"]["lines"] > 0 and "disk_full" in losses["reports"][0]["reasons"]

        # 2. Restart on a disk full to the last byte, with no state file to start from.
        agents[0].send_signal(signal.SIGTERM)
        assert agents[0].wait(30) == 0
        shutil.rmtree(state)
        fill(disk)
        agents.append(start_agent(collector.url, token, HOST, work, interval=0.5, extra=extra))
        seen = host(collector)["last_seen"]
        wait_for(lambda: host(collector)["last_seen"] > seen + 1, 60)  # heartbeats
        kernel.write(50)  # live lines still stream
        wait_for(lambda: accounted(collector, db_url, kernel), 60, 0.5)

        # 3. The collector goes away again on the full disk: nothing fits, all is counted.
        before = host(collector)["spool_losses"]["total"]["lines"]
        collector.stop(signal.SIGKILL)
        kernel.write(200)
        time.sleep(3)
        assert agents[1].poll() is None
        collector.start()
        wait_for(lambda: accounted(collector, db_url, kernel), 60, 0.5)
        assert host(collector)["spool_losses"]["total"]["lines"] >= before + 200
    finally:
        kernel.stop.set()
        stop_all(agents)
        collector.stop()
    rows, distinct = kseqs(db_url)
    assert rows == distinct  # no line stored twice
