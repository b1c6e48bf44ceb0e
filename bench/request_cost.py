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
interpreter); ``--vs DIR`` runs that checkout's collector beside this one, each on its own
database, for a before/after that holds on a noisy machine (e.g. ``git worktree add
/tmp/fw-main main``; then ``--vs /tmp/fw-main``): both heartbeat through the same idle
window, and the bursts go to one and then the other in blocks of ``BLOCK`` requests, so both
figures come from the same stretches of the machine (one after the other, the same code
measured 0.5 and 1.04 of itself while other work came and went).

    python bench/request_cost.py [--db sqlite,postgres] [--requests 400] [--idle-s 60]

Prints the figures per database; the last line is JSON with, per database,
``heartbeat_cpu_ms``, ``small_batch_cpu_ms``, ``sample_cpu_ms`` and
``collector_cpu_idle_pct`` (with ``--vs``, also ``baseline`` and ``ratio``: after / before).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.wire import INGEST_PATH
from bench._common import ROOT, add_host, cpu_seconds, database, free_port, start_collector

HOST = "bench-cost"
BLOCK = 50  # requests to one collector before the other's turn (--vs)
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


class Side:
    """One checkout's collector, the client posting to it and the host it posts as."""

    def __init__(self, client: httpx.Client, token: str, pid: int) -> None:
        self.client, self.token, self.pid = client, token, pid
        self.agent = Agent()
        self.idle_rate = 0.0  # cores, while it heartbeats at 1 Hz
        self.reset()

    def reset(self) -> None:
        self.cpu = self.wall = 0.0
        self.requests = 0

    def post_block(self, bodies: list[dict[str, Any]]) -> None:
        cpu0, t0 = cpu_seconds(self.pid), time.monotonic()
        for body in bodies:
            post(self.client, self.token, body)
        self.cpu += cpu_seconds(self.pid) - cpu0
        self.wall += time.monotonic() - t0
        self.requests += len(bodies)

    def per_request_ms(self) -> float:
        """CPU ms a request, less the idle rate over the same wall time; then start afresh."""
        ms = 1000.0 * max(0.0, self.cpu - self.idle_rate * self.wall) / self.requests
        self.reset()
        return ms


def idle_pcts(sides: list[Side], seconds: float) -> list[float]:
    """% of one core each, all heartbeating at 1 Hz through the same window."""
    cpu0, t0 = [cpu_seconds(s.pid) for s in sides], time.monotonic()
    k = 0
    while (elapsed := time.monotonic() - t0) < seconds:
        for side in sides:
            post(side.client, side.token, side.agent.batch())
        k += 1
        time.sleep(max(0.0, t0 + k - time.monotonic()))
    return [100.0 * (cpu_seconds(s.pid) - c) / elapsed for s, c in zip(sides, cpu0, strict=True)]


def bursts(sides: list[Side], requests: int, **kind: int) -> list[float]:
    """CPU ms a request back to back, each side in turn ``BLOCK`` requests at a time (the
    first side alternating), after a warm-up (first statements compiled, caches filled)."""
    for side in sides:
        side.post_block([side.agent.batch(**kind) for _ in range(20)])
        side.reset()
    for block in range(max(1, requests // BLOCK)):
        for side in sides if block % 2 == 0 else sides[::-1]:
            side.post_block([side.agent.batch(**kind) for _ in range(BLOCK)])
    return [side.per_request_ms() for side in sides]


def measure(kind: str, roots: list[Path], args: argparse.Namespace) -> list[dict[str, float]]:
    """The figures of each checkout in ``roots``, their collectors running side by side."""
    with ExitStack() as stack:
        sides = []
        for n, root in enumerate(roots):
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"fw-cost{n}-")))
            db_url = stack.enter_context(database(kind, tmp))
            token = add_host(db_url, HOST, root=root)
            url, pid = stack.enter_context(collector(db_url, root, tmp))
            client = stack.enter_context(httpx.Client(base_url=url, timeout=30))
            sides.append(Side(client, token, pid))
        return run_phases(sides, args)


def run_phases(sides: list[Side], args: argparse.Namespace) -> list[dict[str, float]]:
    """Idle first (its rate is the background taken off each burst), then the bursts."""
    for side in sides:
        for _ in range(20):
            post(side.client, side.token, side.agent.batch())
    idle = idle_pcts(sides, args.idle_s)
    for side, pct in zip(sides, idle, strict=True):
        side.idle_rate = pct / 100.0
    figures = {
        "heartbeat_cpu_ms": bursts(sides, args.requests),
        "small_batch_cpu_ms": bursts(sides, args.requests, lines=args.lines),
        "sample_cpu_ms": bursts(sides, args.requests, samples=1),
    }
    return [
        {"collector_cpu_idle_pct": round(idle[n], 2)}
        | {name: round(values[n], 3) for name, values in figures.items()}
        for n in range(len(sides))
    ]


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
        "--vs", type=Path, help="a baseline checkout, its collector run beside --root's"
    )
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for kind in args.db.split(","):
        roots = [args.root.resolve(), *([args.vs.resolve()] if args.vs else [])]
        try:
            this, *others = measure(kind, roots, args)
        except Exception as exc:  # a missing PostgreSQL skips its column, with the reason
            print(f"{kind}: skipped: {exc}", flush=True)
            continue
        results[kind] = this
        before = others[0] if others else None
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
