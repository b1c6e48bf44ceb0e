"""Sustained ingest through the real HTTP endpoint, batches of 1,000, SQLite and PostgreSQL.

Prints figures per backend; the last line is a JSON object of lines/s and samples/s.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import add_host, running_collector

BATCH = 1000
DURATION_S = 10.0
CLIENTS = 2
BOOT = "bench-boot-0000"


def make_bodies(kind: str, client: int, count: int) -> list[bytes]:
    """Pre-serialised batches, so the client measures the collector, not json.dumps."""
    bodies = []
    base = client * 10**9
    for b in range(count):
        seq0 = base + b * BATCH
        if kind == "lines":
            records = [
                {
                    "seq": seq0 + i,
                    "ts": 1764400000.0 + (seq0 + i) / 1000,
                    "source": "kmsg",
                    "priority": 6,
                    "facility": 0,
                    "kseq": seq0 + i,
                    "text": f"NVRM: bench line {seq0 + i} _memdescAllocInternal @ mem_desc.c:1359",
                }
                for i in range(BATCH)
            ]
        else:
            records = [
                {
                    "seq": seq0 + i,
                    "ts": 1764400000.0 + (seq0 + i) / 1000,
                    "mem": {
                        "MemTotal": 128 << 30,
                        "MemAvailable": 60 << 30,
                        "MemFree": 2 << 30,
                        "SwapTotal": 16 << 30,
                        "SwapFree": 16 << 30,
                        "Cached": 40 << 30,
                    },
                    "psi": {
                        "memory": {
                            "some": {"avg10": 0.5, "avg60": 0.2, "avg300": 0.1, "total": 1234},
                            "full": {"avg10": 0.1, "avg60": 0.0, "avg300": 0.0, "total": 99},
                        }
                    },
                    "vmstat": {"pgmajfault": 0.0, "pswpin": 0.0, "pswpout": 0.0},
                    "load": {"1": 1.0, "5": 0.8, "15": 0.5},
                }
                for i in range(BATCH)
            ]
        body = {
            "host": "bench",
            "boot_id": BOOT,
            "agent": {"version": "bench", "pid": 1},
            kind: records,
        }
        bodies.append(json.dumps(body).encode())
    return bodies


def run(url: str, token: str, kind: str) -> float:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = [make_bodies(kind, c, 200) for c in range(CLIENTS)]
    counts = [0] * CLIENTS
    stop = time.monotonic() + DURATION_S

    def worker(c: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            for body in bodies[c]:
                if time.monotonic() >= stop:
                    break
                resp = client.post("/api/v1/ingest", content=body)
                resp.raise_for_status()
                counts[c] += resp.json()["stored"][kind]

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def bench_backend(name: str, db_url: str) -> dict[str, float]:
    token = add_host(db_url, "bench")
    with running_collector(db_url) as url:
        lines = run(url, token, "lines")
        samples = run(url, token, "samples")
    print(f"{name}: {lines:,.0f} lines/s, {samples:,.0f} samples/s", flush=True)
    return {f"{name}_lines_per_s": round(lines), f"{name}_samples_per_s": round(samples)}


def main() -> None:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        figures |= bench_backend("sqlite", f"sqlite:///{tmp}/bench.db")
    from tests.support.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as pg:
        figures |= bench_backend("postgres", pg.url)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
