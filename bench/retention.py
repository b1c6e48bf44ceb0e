"""Disk a host costs: one simulated hour at 1 Hz samples plus a typical line rate, stored through
the real ingest path on SQLite and PostgreSQL, sized per kind, scaled to a day, a month and a
year under the default retention.

Samples are read by the agent's own sources from the checked-in /proc fixture, with a GB10 GPU
entry and a vLLM endpoint entry as the agent sends them. Lines: ``--lines-per-s`` (default 0.5:
vLLM's request log, the journal and a little kernel chatter). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from _common import FIXTURE_PROC, database

from agent.sources.proc import LoadSource, MemSource, PsiSource, VmstatSource
from collector import db
from collector.hosts import registry
from collector.ingest.batch import ingest_batch
from collector.retention.policy import defaults
from collector.retention.usage import host_usage, measure
from collector.schemas import Batch
from collector.settings import Settings
from collector.timeutil import from_epoch

BOOT = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
START = 1764400000.0
HOUR = 3600


def proc_sections() -> dict[str, Any]:
    sources = (MemSource(FIXTURE_PROC), PsiSource(FIXTURE_PROC), VmstatSource(FIXTURE_PROC))
    return {s.name: s.read() for s in (*sources, LoadSource(FIXTURE_PROC))}


def sample(seq: int, base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    gpu = {
        "index": 0, "name": "NVIDIA GB10", "pci": "0000:0f:01.0", "util": rng.randint(0, 100),
        "mem_used": rng.randint(2**33, 2**36), "mem_total": None, "power_w": rng.uniform(8, 90),
        "temp_c": rng.randint(40, 80), "clocks": {"sm": 2418, "mem": 4266},
        "unsupported": ["mem_total"],
    }  # fmt: skip
    vllm = {
        "url": "http://127.0.0.1:8000", "health": 200, "health_ms": rng.uniform(0.5, 4),
        "error": None, "running": rng.randint(0, 8), "waiting": rng.randint(0, 2),
        "kv_usage": rng.random(), "preemptions": 0, "prompt_tokens": 1000 * seq,
        "generation_tokens": 800 * seq, "spec_accepted": 300 * seq, "spec_draft": 500 * seq,
        "requests_success": seq // 10,
    }  # fmt: skip
    mem = {k: v + rng.randint(-4096, 4096) * 1024 for k, v in base["mem"].items()}
    return {"seq": seq, "ts": START + seq, **base, "mem": mem, "gpu": [gpu], "vllm": [vllm]}


LINES = (
    ("vllm", 6, 0.5, 'INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
    ("vllm", 6, 0.3, "INFO 11-29 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput:"
     " 812.4 tokens/s, Avg generation throughput: 41.2 tokens/s, Running: 2 reqs"),
    ("journal", 6, 0.15, "systemd[1]: Started session-42.scope - Session 42 of User ubuntu."),
    ("kmsg", 6, 0.04, "docker0: port 1(veth1a2b3c4) entered forwarding state"),
    ("kmsg", 3, 0.01, "nvme nvme0: I/O 12 QID 3 timeout, completion polled"),
)  # fmt: skip


def line(seq: int, rng: random.Random) -> dict[str, Any]:
    source, priority, _, text = rng.choices(LINES, weights=[w for *_, w, _ in LINES])[0]
    kseq = seq if source == "kmsg" else None
    return {"seq": seq, "ts": START + seq / 2, "source": source, "priority": priority,
            "kseq": kseq, "text": text}  # fmt: skip


def bench_backend(kind: str, url: str, lines_per_s: float) -> dict[str, Any]:
    settings = Settings(db_url=url)
    db.migrate(url)
    engine = db.make_engine(url)
    factory = db.make_sessionmaker(engine)
    with db.session_scope(factory) as session:
        registry.create_host(session, name="bench")
    rng, base = random.Random(7), proc_sections()
    n_lines = 0
    for minute in range(HOUR // 60):
        samples = [sample(minute * 60 + i, base, rng) for i in range(60)]
        count = int((minute + 1) * 60 * lines_per_s) - n_lines
        lines = [line(n_lines + i, rng) for i in range(count)]
        n_lines += count
        body = {"host": "bench", "boot_id": BOOT, "agent": {"version": "bench", "pid": 1},
                "samples": samples, "lines": lines}  # fmt: skip
        received = START + minute * 60 + 60
        with db.session_scope(factory) as session:
            host = registry.get_host(session, name="bench")
            batch = Batch.model_validate(body)
            at = from_epoch(received)
            ingest_batch(
                session,
                host_id=host.id,
                batch=batch,
                received_at=received,
                now=at,
                settings=settings,
            )
    if kind == "postgres":
        db.reclaim_space(factory)  # VACUUM ANALYZE: settled sizes, no dead rows counted
    with db.read_scope(factory) as session:
        usage = host_usage(measure(session, now=START + HOUR), host=registry.get_host(
            session, name="bench"), settings=settings)  # fmt: skip
    engine.dispose()
    per_hour = {u["kind"]: u for u in usage if u["rows"]}
    days = defaults(settings)
    per_day = {k: u["bytes"] * 24 for k, u in per_hour.items()}
    kept = {k: min(days.get(k) or 365, 365) for k in per_day}  # days held in steady state
    month = sum(b * min(30, kept[k]) for k, b in per_day.items())
    year = sum(b * kept[k] for k, b in per_day.items())
    out = {
        f"{kind}_bytes_per_sample": round(per_hour["samples"]["bytes"] / HOUR),
        f"{kind}_bytes_per_line": round(
            sum(per_hour[k]["bytes"] for k in ("lines", "kernel_lines") if k in per_hour)
            / max(n_lines, 1)
        ),
        f"{kind}_bytes_per_host_day": round(sum(per_day.values())),
        f"{kind}_bytes_per_host_month": round(month),
        f"{kind}_bytes_per_host_year": round(year),
    }
    for name, value in out.items():
        print(f"{name}: {value:,}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines-per-s", type=float, default=0.5)
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    args = parser.parse_args()
    figures: dict[str, Any] = {"lines_per_s": args.lines_per_s}
    for kind in (args.only,) if args.only else ("sqlite", "postgres"):
        with tempfile.TemporaryDirectory() as tmp, database(kind, Path(tmp)) as url:
            figures |= bench_backend(kind, url, args.lines_per_s)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
