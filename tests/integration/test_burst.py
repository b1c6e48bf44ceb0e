"""A kernel burst through the real agent (pipelined shipping) into the real collector, on
SQLite and PostgreSQL: the collector killed mid-burst and started again, then the agent killed
mid-burst and started again. Every record is stored exactly once, in the order it was written.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from collector import db
from collector.models import Line
from tests.support.fleet import CollectorProcess, register, start_agent, stop_all
from tests.twohost.harness import wait_for

pytestmark = pytest.mark.timeout(300)

HOST = "burst"
BURST = 6_000  # several batches of the agent's (its record limit is 20,000; bytes cut sooner)


def burst(kmsg: Path, kseqs: range) -> None:
    """Kernel records written as fast as a writer can (one write a record), ~1 KiB each."""
    pad = b"p" * 1000  # big records: a burst spans several batches
    with open(kmsg, "ab", buffering=0) as f:
        for k in kseqs:
            f.write(b"6,%d,%d,-;burst record %d %s\n" % (k, 1000 + k, k, pad))


def stored(engine: object) -> list[tuple[int, int]]:
    """(seq, kseq) of the stored kernel lines, in seq order."""
    with engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.execute(select(Line.seq, Line.kseq).where(Line.source == "kmsg"))
        return sorted((seq, kseq) for seq, kseq in rows)


def test_a_burst_survives_a_collector_kill_and_an_agent_kill_exactly_once(
    db_url: str, tmp_path: Path
) -> None:
    token = register(db_url, [HOST])[HOST]
    collector = CollectorProcess(db_url, tmp_path / "collector.log")
    collector.start()
    engine = db.make_engine(db_url)
    work = tmp_path / "agent"
    agents = [start_agent(collector.url, token, HOST, work, extra=("--timeout", "2"))]
    kmsg = work / "kmsg"
    try:
        burst(kmsg, range(0, 1))
        wait_for(lambda: len(stored(engine)) == 1, timeout=60)

        # the collector dies mid-burst (kill -9) and comes back on its port
        burst(kmsg, range(1, BURST))
        wait_for(lambda: len(stored(engine)) > 100, timeout=60)
        collector.stop(signal.SIGKILL)
        time.sleep(2)
        collector.start()
        wait_for(lambda: len(stored(engine)) == BURST, timeout=120)
        rows = stored(engine)
        assert [k for _, k in rows] == list(range(BURST))  # in seq order = written order
        seqs = [s for s, _ in rows]
        assert seqs == list(range(seqs[0], seqs[0] + BURST))  # no gap, none twice

        # the agent dies mid-burst (kill -9); the next one re-reads the kernel's records and
        # ships only what was not stored
        burst(kmsg, range(BURST, 2 * BURST))
        wait_for(lambda: len(stored(engine)) > BURST + 100, timeout=60)
        agents[0].send_signal(signal.SIGKILL)
        agents[0].wait(10)
        agents.append(start_agent(collector.url, token, HOST, work, extra=("--timeout", "2")))
        wait_for(lambda: len(stored(engine)) == 2 * BURST, timeout=120)
        time.sleep(2)  # nothing more comes
        rows = stored(engine)
        assert [k for _, k in rows] == list(range(2 * BURST))  # each record once, in order
    finally:
        stop_all(agents)
        collector.stop()
        engine.dispose()
