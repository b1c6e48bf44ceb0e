"""Collector memory over a long run: RSS of a real collector with many real agents.

A real collector process (``serve``, scheduler on; SQLite, or PostgreSQL with ``--db postgres``)
and ``--hosts`` real agent processes, each following its own kmsg file that this script appends
``--lines-per-s`` records to (with a kernel-event line now and then). Prints the collector's RSS
every ``--every`` seconds; the last line is ``{"hosts", "minutes", "rss_mb_first",
"rss_mb_last", "rss_mb_max", "rss_mb_growth_second_half"}``. Bounded memory shows as a flat
second half.

    python bench/memory.py [--minutes 30] [--hosts 21] [--lines-per-s 5] [--db sqlite|postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import add_host, database, running_collector_process, start_agent

EVENT_LINE = "NVRM: Xid (PCI:000f:01:00): 13, pid=4242, name=python3, Graphics Exception"


def rss_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return 0.0


def feed(kmsgs: list[Path], per_s: float, stop: threading.Event) -> None:
    """Append kernel records to every host's kmsg file at ``per_s`` each."""
    seq, usec = 0, 1_000_000
    while not stop.wait(1.0):
        for path in kmsgs:
            with open(path, "ab") as f:
                for i in range(int(per_s)):
                    usec += 1000
                    text = EVENT_LINE if (seq + i) % 600 == 0 else f"bench memory line {seq + i}"
                    f.write(b"6,%d,%d,-;%s\n" % (seq + i, usec, text.encode()))
        seq += int(per_s)


@contextlib.contextmanager
def agents(url: str, tokens: dict[str, str], tmp: Path) -> Iterator[list[Path]]:
    procs: list[subprocess.Popen[bytes]] = []
    kmsgs = []
    try:
        for name, token in tokens.items():
            kmsg = tmp / name / "kmsg"
            kmsg.parent.mkdir()
            kmsg.touch()
            kmsgs.append(kmsg)
            procs.append(start_agent(url, token, name, tmp / name, kmsg=kmsg, canary=True))
        yield kmsgs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--hosts", type=int, default=21)
    parser.add_argument("--lines-per-s", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between RSS prints")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()

    readings: list[tuple[float, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="fw-memory-") as tmp_name,
        database(args.db, Path(tmp_name)) as db_url,
    ):
        tmp = Path(tmp_name)
        tokens = {f"mem-{i:02d}": add_host(db_url, f"mem-{i:02d}") for i in range(args.hosts)}
        with running_collector_process(db_url) as (url, collector):
            stop = threading.Event()
            with agents(url, tokens, tmp) as kmsgs:
                feeder = threading.Thread(target=feed, args=(kmsgs, args.lines_per_s, stop))
                feeder.start()
                started = time.monotonic()
                end = started + args.minutes * 60
                try:
                    while True:
                        elapsed = time.monotonic() - started
                        readings.append((elapsed, rss_mb(collector.pid)))
                        print(f"{elapsed / 60:6.1f} min  collector RSS {readings[-1][1]:.1f} MB",
                              flush=True)  # fmt: skip
                        if time.monotonic() >= end:
                            break
                        time.sleep(min(args.every, max(0.0, end - time.monotonic())))
                finally:
                    stop.set()
                    feeder.join()
    values = [mb for _, mb in readings]
    half = [mb for t, mb in readings if t >= readings[-1][0] / 2]
    result = {
        "hosts": args.hosts,
        "minutes": args.minutes,
        "db": args.db,
        "rss_mb_first": round(values[0], 1),
        "rss_mb_last": round(values[-1], 1),
        "rss_mb_max": round(max(values), 1),
        "rss_mb_growth_second_half": round(half[-1] - half[0], 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
