"""Spool replay: how long after the collector is back the backlog of an outage is stored.

A real collector process and a real agent following a kmsg file that this script appends
``--rate`` kernel lines a second to, all along. The collector is stopped (SIGTERM) for
``--outage`` seconds and started again on the same port; the clock starts when it answers
``/healthz`` and stops when every line written before that is in the database (polled every
20 ms). Runs on SQLite and on a throwaway PostgreSQL; the last line is
``{"sqlite_drain_s": .., "postgres_drain_s": .., "lines": ..}`` (target: <= 5 s each).

    python bench/replay.py [--outage 30] [--rate 200] [--db sqlite,postgres]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import add_host, database, free_port, start_agent, start_collector
from collector import db
from collector.models import Line

HOST = "bench-replay"


class Kernel(threading.Thread):
    def __init__(self, kmsg: Path, rate: float) -> None:
        super().__init__(daemon=True)
        self.kmsg, self.rate, self.next = kmsg, rate, 0
        self.stop = threading.Event()

    def run(self) -> None:
        start, usec = time.monotonic(), 1_000_000
        while not self.stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            with open(self.kmsg, "ab") as f:
                while self.next < due:
                    usec += 1000
                    f.write(b"6,%d,%d,-;replay bench line %d\n" % (self.next, usec, self.next))
                    self.next += 1
            time.sleep(0.01)


def stored_below(engine: object, kseq: int) -> int:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return conn.execute(
            select(func.count()).select_from(Line).where(Line.kseq < kseq)
        ).scalar_one()


def run(kind: str, outage: float, rate: float) -> tuple[float, int]:
    with (
        tempfile.TemporaryDirectory(prefix="fw-replay-") as tmp_name,
        database(kind, Path(tmp_name)) as db_url,
    ):
        tmp = Path(tmp_name)
        token = add_host(db_url, HOST)
        port = free_port()
        collector = start_collector(db_url, port, tmp / "collector.log")
        kmsg = tmp / "kmsg"
        kmsg.touch()
        agent = start_agent(f"http://127.0.0.1:{port}", token, HOST, tmp / "agent", kmsg=kmsg)
        engine = db.make_engine(db_url)
        kernel = Kernel(kmsg, rate)
        try:
            kernel.start()
            deadline = time.monotonic() + 60
            while stored_below(engine, 10**9) < rate * 2:  # streaming live
                if time.monotonic() > deadline:
                    raise RuntimeError("the agent's lines do not arrive")
                time.sleep(0.1)
            collector.send_signal(signal.SIGTERM)
            collector.wait(30)
            time.sleep(outage)
            collector = start_collector(db_url, port, tmp / "collector.log")
            back, written = time.monotonic(), kernel.next
            while stored_below(engine, written) < written:
                if time.monotonic() - back > 120:
                    raise RuntimeError("the backlog was not stored within 2 minutes")
                time.sleep(0.02)
            drain = time.monotonic() - back
        finally:
            kernel.stop.set()
            agent.terminate()
            agent.wait(30)
            collector.terminate()
            collector.wait(30)
            engine.dispose()
        print(f"{kind}: {outage:.0f} s outage at {rate:.0f} lines/s, {written} lines stored "
              f"{drain:.2f} s after the collector answered", flush=True)  # fmt: skip
        return drain, written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--outage", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--db", default="sqlite,postgres")
    args = parser.parse_args()
    figures: dict[str, float | int] = {}
    for kind in args.db.split(","):
        drain, lines = run(kind, args.outage, args.rate)
        figures[f"{kind}_drain_s"] = round(drain, 2)
        figures["lines"] = lines
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
