"""Detection latency: last heartbeat of a frozen host → incident.opened webhook at a receiver.

Real collector (uvicorn, scheduler on, SQLite) on loopback, a stand-in agent per trial frozen with
SIGSTOP, and a vLLM URL that accepts connections but never answers, so every probe runs to the
deadline (the worst case). Prints each trial, p50/p99, and as the last line
``{"p50_s": .., "p99_s": ..}``.

    python bench/detection.py [--trials 20] [--interval 1] [--grace 3] [--probe-deadline 2]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import percentile
from tests.collector.freeze_support import SECRET, receiver
from tests.twohost.harness import StandinAgent, running_collector, wait_for


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--probe-deadline", type=float, default=2.0)
    args = parser.parse_args()

    silent = socket.socket()  # listens, never answers: a hung vLLM /health
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    vllm_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    latencies: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        receiver() as rec,
        running_collector(
            Path(tmp),
            webhook_urls=f"{rec.url}|json|{SECRET}",
            grace_s=args.grace,
            probe_deadline_s=args.probe_deadline,
        ) as c,
    ):
        boot = Path(tmp) / "boot_id"
        boot.write_text("33333333-3333-3333-3333-333333333333\n")
        for trial in range(args.trials):
            name = f"bench-{trial}"
            token = c.add_host(name, vllm_url=vllm_url)
            agent = StandinAgent(c.url, token, name, boot, args.interval).start()
            try:
                wait_for(lambda n=name: c.api(f"/api/v1/hosts/{n}")["status"] == "up", 30)
                time.sleep(args.interval * 1.5)
                rec.event.clear()
                before = len(rec.received)
                agent.signal(signal.SIGSTOP)
                wait_for(lambda b=before: len(rec.received) > b, 60, 0.01)
                arrived = time.time()
                last_seen = c.api(f"/api/v1/hosts/{name}")["last_seen"]
                latencies.append(arrived - last_seen)
                print(f"trial {trial + 1}: {latencies[-1]:.3f} s", flush=True)
            finally:
                agent.stop()
    silent.close()
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    print(f"p50 {p50:.3f} s, p99 {p99:.3f} s over {len(latencies)} trials")
    print(json.dumps({"p50_s": round(p50, 3), "p99_s": round(p99, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
