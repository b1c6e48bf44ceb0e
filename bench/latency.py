"""Kernel line appended to the agent's --kmsg file → row visible in the collector's database.

A real collector (SQLite) and a real agent process following a regular file; 200 records are
appended one at a time, 20-50 ms apart, and the database is polled read-only every 2 ms.
Prints p50/p99; the last line is ``{"p50_ms": .., "p99_ms": ..}`` (target p99 <= 250 ms).

``--vs DIR``: another checkout's collector and agent run beside these (their own database and
file), and the records go to one and then the other, the first alternating: a before/after of a
few percent that holds on a noisy machine. The JSON line adds ``baseline_p50_ms``,
``baseline_p99_ms`` and ``p50_ratio`` (this ÷ that).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, add_host, free_port, percentile, start_collector

LINES = 200
POLL_S = 0.002
HOST = "bench-latency"


def start_agent(
    url: str, token: str, tmp: Path, kmsg: Path, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "agent", "--collector", url, "--token", token,
        "--host-name", HOST, "--kmsg", str(kmsg), "--state-dir", str(tmp / "state"),
        "--no-gpu", "--container-label", "", "--canary-interval", "0",
        "--pstore-dir", str(tmp / "pstore"),
    ]  # fmt: skip
    log = open(tmp / "agent.log", "ab")  # noqa: SIM115 - lives as long as the process
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(cmd, cwd=root, stdout=log, stderr=log, env=env)


class Side:
    """One checkout's collector and agent, the file its agent follows and what it measured."""

    def __init__(self, root: Path, tmp: Path, stack: ExitStack) -> None:
        tmp.mkdir()
        db_path = tmp / "fw.db"
        db_url = f"sqlite:///{db_path}"
        token = add_host(db_url, HOST, root=root)
        port = free_port()
        proc = start_collector(db_url, port, tmp / "collector.log", root=root)
        stack.callback(stop, proc)
        self.kmsg = tmp / "kmsg"
        self.kmsg.touch()
        agent = start_agent(f"http://127.0.0.1:{port}", token, tmp, self.kmsg, root)
        stack.callback(stop, agent)
        self.conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        stack.callback(self.conn.close)
        self.latencies: list[float] = []

    def probe(self, k: int, usec: int) -> None:
        """Append record ``k`` and wait for its row."""
        record = b"6,%d,%d,-;latency probe %d\n" % (k, usec, k)
        with open(self.kmsg, "ab") as f:
            f.write(record)
            t0 = time.perf_counter()
        query = "SELECT 1 FROM lines WHERE kseq = ? AND source = 'kmsg'"
        wait_row(self.conn, query, (k,), 30)
        self.latencies.append((time.perf_counter() - t0) * 1000.0)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(30)


def wait_row(
    conn: sqlite3.Connection, query: str, args: tuple[object, ...], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while conn.execute(query, args).fetchone() is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"row not visible within {timeout} s: {query} {args}")
        time.sleep(POLL_S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, help="another checkout, run beside this one")
    parser.add_argument("--lines", type=int, default=LINES, help="records (each side)")
    args = parser.parse_args()
    roots = [ROOT, *([args.vs.resolve()] if args.vs else [])]
    with tempfile.TemporaryDirectory(prefix="fw-latency-") as tmp_name, ExitStack() as stack:
        sides = [Side(root, Path(tmp_name) / f"side{n}", stack) for n, root in enumerate(roots)]
        for side in sides:
            wait_row(side.conn, "SELECT 1 FROM samples LIMIT 1", (), 60)
        rng = random.Random(1)
        usec = 10_000_000
        for k in range(args.lines):
            for side in sides if k % 2 == 0 else sides[::-1]:
                usec += 1000
                side.probe(k, usec)
                time.sleep(rng.uniform(0.02, 0.05))
    figures: dict[str, float] = {}
    for side, name in zip(sides, ("", "baseline_"), strict=False):
        p50 = statistics.median(side.latencies)
        p99 = percentile(side.latencies, 0.99)
        label = "this checkout" if not name else f"beside it, {args.vs}"
        print(f"{label}: {args.lines} kernel lines: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
              f"max {max(side.latencies):.1f} ms")  # fmt: skip
        figures |= {f"{name}p50_ms": round(p50, 2), f"{name}p99_ms": round(p99, 2)}
    if args.vs:
        figures["p50_ratio"] = round(figures["p50_ms"] / figures["baseline_p50_ms"], 3)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
