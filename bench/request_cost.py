"""The collector's CPU per ingest request, and its idle cost for one host.

A real collector process (``serve``, scheduler on) on a throwaway database, this process as
the client over real HTTP (one keep-alive connection). The collector's CPU is read from
``/proc/PID/stat`` (user + system, every thread), so the figures are CPU time, not wall time:

- idle: one host heartbeating at 1 Hz (empty batches) for ``--idle-s``: CPU ÷ wall, in % of
  one core. It includes every scheduler job (heartbeat check, pre-probes, alive tick, ...).
- heartbeat: ``--requests`` empty batches back to back: CPU per request, less the idle rate
  over the same wall time (the scheduler's share).
- small batch: the same with ``--lines`` benign kernel lines a batch.
- sample: the same with one 1 Hz sample a batch (what an agent sends every second).

``--root DIR`` runs the collector from another checkout (its own code and migrations, this
interpreter); ``--vs DIR`` measures that checkout first, each database, for a before/after in
one run (e.g. ``git worktree add /tmp/fw-main main``; then ``--vs /tmp/fw-main``).

    python bench/request_cost.py [--db sqlite,postgres] [--requests 400] [--idle-s 60]

Prints the figures per database; the last line is JSON with, per database,
``heartbeat_cpu_ms``, ``small_batch_cpu_ms``, ``sample_cpu_ms`` and
``collector_cpu_idle_pct`` (with ``--vs``, also ``baseline`` and ``ratio``: after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.wire import INGEST_PATH
from bench._common import ROOT, cpu_seconds, database, free_port, start_collector

HOST = "bench-cost"
BOOT = "5b1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"


@contextmanager
def collector(db_url: str, root: Path, tmp: Path) -> Iterator[tuple[str, int]]:
    """``serve`` from ``root``'s code on a free port; (url, pid) once it answers."""
    port = free_port()
    log = tmp / "collector.log"
    proc = start_collector(db_url, port, log, root=root, FREEZEWATCH_DATA_DIR=str(tmp / "data"))
    try:
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def add_host(db_url: str, root: Path) -> str:
    """Register the host with ``root``'s CLI (which migrates the database first); its token."""
    out = subprocess.run(
        [sys.executable, "-m", "collector", "add-host", HOST],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "FREEZEWATCH_DB_URL": db_url},
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


class Agent:
    """Batches as an agent sends them, each with its own seqs."""

    def __init__(self) -> None:
        self.seq = 0
        self.kseq = 0
        self.started_at = time.time() - 60
        self.clock = self.started_at  # the agent's: a second a batch, as at 1 Hz

    def batch(self, *, lines: int = 0, samples: int = 0) -> dict[str, Any]:
        self.clock += 1.0
        now = self.clock
        out: dict[str, Any] = {
            "host": HOST,
            "boot_id": BOOT,
            "agent": {"version": "bench", "pid": 4242, "started_at": self.started_at,
                      "sent_at": time.time()},
            "samples": [],
            "lines": [],
            "events": [],
        }  # fmt: skip
        for _ in range(lines):
            self.seq += 1
            self.kseq += 1
            out["lines"].append({
                "seq": self.seq, "ts": now, "source": "kmsg", "priority": 6, "facility": 0,
                "kseq": self.kseq, "text": f"usb 1-1: new high-speed USB device number {self.kseq}",
            })  # fmt: skip
        for _ in range(samples):
            self.seq += 1
            out["samples"].append({
                "seq": self.seq, "ts": now,
                "mem": {"MemTotal": 128 * 2**30, "MemAvailable": 90 * 2**30,
                        "MemFree": 80 * 2**30, "SwapTotal": 0, "SwapFree": 0},
                "psi": {"memory": {"some": {"avg10": 0.0}, "full": {"avg10": 0.0}},
                        "cpu": {"some": {"avg10": 1.2}}},
                "load": {"1": 0.4},
            })  # fmt: skip
        return out


def post(client: httpx.Client, token: str, body: dict[str, Any]) -> None:
    answer = client.post(
        INGEST_PATH,
        content=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    answer.raise_for_status()


def idle_pct(client: httpx.Client, token: str, agent: Agent, pid: int, seconds: float) -> float:
    """% of one core while one host heartbeats at 1 Hz."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    k = 0
    while (elapsed := time.monotonic() - t0) < seconds:
        post(client, token, agent.batch())
        k += 1
        time.sleep(max(0.0, t0 + k - time.monotonic()))
    return 100.0 * (cpu_seconds(pid) - cpu0) / elapsed


def per_request_ms(
    client: httpx.Client,
    token: str,
    agent: Agent,
    pid: int,
    *,
    requests: int,
    idle_rate: float,
    **kind: int,
) -> float:
    """CPU ms per request back to back, less the idle rate (cores) over the same wall time."""
    for _ in range(20):  # warm: first statements compiled, caches filled
        post(client, token, agent.batch(**kind))
    bodies = [agent.batch(**kind) for _ in range(requests)]
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for body in bodies:
        post(client, token, body)
    cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - t0
    return 1000.0 * max(0.0, cpu - idle_rate * wall) / requests


def measure(kind: str, root: Path, args: argparse.Namespace) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory(prefix="fw-cost-") as tmp_name,
        database(kind, Path(tmp_name)) as db_url,
    ):
        token = add_host(db_url, root)
        with (
            collector(db_url, root, Path(tmp_name)) as (url, pid),
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            return run_phases(client, token, pid, args)


def run_phases(
    client: httpx.Client, token: str, pid: int, args: argparse.Namespace
) -> dict[str, float]:
    """Idle first (its rate is the background taken off each burst), then the bursts."""
    agent = Agent()
    for _ in range(20):
        post(client, token, agent.batch())
    idle = idle_pct(client, token, agent, pid, args.idle_s)
    burst = {"requests": args.requests, "idle_rate": idle / 100.0}
    return {
        "collector_cpu_idle_pct": round(idle, 2),
        "heartbeat_cpu_ms": round(per_request_ms(client, token, agent, pid, **burst), 3),
        "small_batch_cpu_ms": round(
            per_request_ms(client, token, agent, pid, lines=args.lines, **burst), 3
        ),
        "sample_cpu_ms": round(per_request_ms(client, token, agent, pid, samples=1, **burst), 3),
    }


FIGURES = ("heartbeat_cpu_ms", "small_batch_cpu_ms", "sample_cpu_ms", "collector_cpu_idle_pct")


def show(label: str, r: dict[str, float], lines: int) -> None:
    print(
        f"{label}: heartbeat {r['heartbeat_cpu_ms']:.2f} ms CPU/request, "
        f"{lines}-line batch {r['small_batch_cpu_ms']:.2f} ms, "
        f"1-sample batch {r['sample_cpu_ms']:.2f} ms, "
        f"idle (1 Hz heartbeats) {r['collector_cpu_idle_pct']:.2f} % of a core",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--lines", type=int, default=10, help="kernel lines in a small batch")
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to run the collector")
    parser.add_argument(
        "--vs", type=Path, help="a baseline checkout, measured before each --root run"
    )
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for kind in args.db.split(","):
        try:
            before = measure(kind, args.vs.resolve(), args) if args.vs else None
            results[kind] = measure(kind, args.root.resolve(), args)
        except Exception as exc:  # a missing PostgreSQL skips its column, with the reason
            print(f"{kind}: skipped: {exc}", flush=True)
            continue
        show(kind, results[kind], args.lines)
        if before is not None:
            show(f"{kind} baseline", before, args.lines)
            results[kind]["baseline"] = before
            results[kind]["ratio"] = {
                f: round(results[kind][f] / before[f], 3) if before[f] else None for f in FIGURES
            }
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
