"""Kernel line appended to the agent's --kmsg file → row visible in the collector's database.

A real collector (SQLite) and a real agent process following a regular file; 200 records are
appended one at a time, 20-50 ms apart, and the database is polled read-only every 2 ms.
Prints p50/p99; the last line is ``{"p50_ms": .., "p99_ms": ..}`` (target p99 <= 250 ms).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, add_host, running_collector

LINES = 200
POLL_S = 0.002
HOST = "bench-latency"


def start_agent(url: str, token: str, tmp: Path, kmsg: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "agent", "--collector", url, "--token", token,
        "--host-name", HOST, "--kmsg", str(kmsg), "--state-dir", str(tmp / "state"),
        "--no-gpu", "--container-label", "", "--canary-interval", "0",
        "--pstore-dir", str(tmp / "pstore"),
    ]  # fmt: skip
    log = open(tmp / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log, env=dict(os.environ))


def wait_row(
    conn: sqlite3.Connection, query: str, args: tuple[object, ...], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute(query, args).fetchone() is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"row not visible within {timeout} s: {query} {args}")
        time.sleep(POLL_S)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="fw-latency-") as tmp_name:
        tmp = Path(tmp_name)
        db_path = tmp / "fw.db"
        db_url = f"sqlite:///{db_path}"
        token = add_host(db_url, HOST)
        kmsg = tmp / "kmsg"
        kmsg.touch()
        with running_collector(db_url) as url:
            agent = start_agent(url, token, tmp, kmsg)
            try:
                conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
                wait_row(conn, "SELECT 1 FROM samples LIMIT 1", (), 60)
                latencies = []
                rng = random.Random(1)
                usec = 10_000_000
                for k in range(LINES):
                    usec += 1000
                    record = b"6,%d,%d,-;latency probe %d\n" % (k, usec, k)
                    with open(kmsg, "ab") as f:
                        f.write(record)
                        t0 = time.perf_counter()
                    query = "SELECT 1 FROM lines WHERE kseq = ? AND source = 'kmsg'"
                    wait_row(conn, query, (k,), 30)
                    latencies.append((time.perf_counter() - t0) * 1000.0)
                    time.sleep(rng.uniform(0.02, 0.05))
                conn.close()
            finally:
                agent.terminate()
                agent.wait(30)
    p50 = statistics.median(latencies)
    p99 = percentile(latencies, 0.99)
    print(f"{LINES} kernel lines: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies):.1f} ms")
    print(json.dumps({"p50_ms": round(p50, 1), "p99_ms": round(p99, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
