"""Disk a host costs: two simulated hours at 1 Hz samples plus a typical line rate, stored
through the real ingest path on SQLite and PostgreSQL, sized per kind, scaled to a day, a month
and a year under the default retention.

How it sizes: the bytes on disk of each table with its indexes (SQLite ``dbstat`` pages,
PostgreSQL ``pg_total_relation_size`` after a VACUUM), shared out per kind by rows
(``collector.retention.usage``), measured after each hour. ``bytes_per_sample`` and the
day/month/year figures are what the second hour added, divided by its rows: the steady cost,
with each table's fixed pages (its first pages, free-space maps, index roots) counted once,
not once an hour. ``bytes_per_sample_avg``: all the bytes over all the rows, fixed pages and
all.

Samples start from what the agent's own sources read from the checked-in /proc fixture (a
host under memory pressure), with a GB10 GPU entry and a vLLM endpoint entry as the agent sends
them, and move each second as a busy host's do (``sample``). Lines: ``--lines-per-s`` (default 0.5:
vLLM's request log, the journal and a little kernel chatter). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.sources.proc import LoadSource, MemSource, PsiSource, VmstatSource
from bench._common import FIXTURE_PROC, database
from collector import db
from collector.hosts import registry
from collector.ingest.batch import ingest_batch
from collector.retention.policy import defaults
from collector.retention.usage import KindUsage, host_usage, measure
from collector.schemas import Batch
from collector.settings import Settings
from collector.timeutil import from_epoch

BOOT = "6f1c3a52-8c1e-4d4e-9f8a-1b2c3d4e5f60"
START = 1764400000.0
HOUR = 3600
HOURS = 2  # the first fills each table's fixed pages; the second is what an hour costs


def proc_sections() -> dict[str, Any]:
    sources = (MemSource(FIXTURE_PROC), PsiSource(FIXTURE_PROC), VmstatSource(FIXTURE_PROC))
    return {s.name: s.read() for s in (*sources, LoadSource(FIXTURE_PROC))}


# The meminfo fields that move second to second on a busy host (±4 MiB in KiB steps here);
# the rest (MemTotal, SwapTotal, the hugepage counts, the zeros) hold still, as on a real host.
VARYING_MEM = (
    "MemFree", "MemAvailable", "Buffers", "Cached", "SwapCached", "Active", "Inactive",
    "Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)", "SwapFree", "Dirty",
    "Writeback", "AnonPages", "Mapped", "Shmem", "KReclaimable", "Slab", "SReclaimable",
    "SUnreclaim", "KernelStack", "PageTables", "Committed_AS", "VmallocUsed", "AnonHugePages",
)  # fmt: skip


RATES = ("pgmajfault", "pswpin", "pswpout")


def sample(seq: int, base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The agent's sample at second ``seq``: every figure a real host moves moves (memory,
    pressure averages and µs totals, load, vmstat rates, GPU and vLLM readings), with the
    precision the agent's sources send."""
    gpu = {
        "index": 0, "pci": "0000:0f:01.0", "name": "NVIDIA GB10", "util": rng.randint(0, 100),
        "mem_used": rng.randint(2**33, 2**36), "mem_total": None,
        "temp_c": rng.randint(40, 80), "power_w": rng.randint(8000, 90000) / 1000,
        "clocks": {"sm": 2418, "mem": 4266, "graphics": 2418}, "unsupported": ["mem_total"],
    }  # fmt: skip
    vllm = {
        "url": "http://127.0.0.1:8000", "health": 200, "health_ms": round(rng.uniform(0.5, 4), 2),
        "error": None, "running": rng.randint(0, 8), "waiting": rng.randint(0, 2),
        "kv_usage": rng.random(), "preemptions": 0, "prompt_tokens": 1000 * seq,
        "generation_tokens": 800 * seq, "iteration_tokens": 1800 * seq,
        "spec_accepted": 300 * seq, "spec_draft": 500 * seq,
    }  # fmt: skip
    mem = dict(base["mem"])
    for key in VARYING_MEM:
        mem[key] = max(0, mem[key] + rng.randint(-4096, 4096) * 1024)
    psi = {resource: {kind: _pressure(v, seq, rng) for kind, v in kinds.items()}
           for resource, kinds in base["psi"].items()}  # fmt: skip
    # reclaim and swap move now and then; OOM kills and stalls stay at zero
    vmstat = {k: float(rng.choice((0, 0, 0, rng.randint(1, 400)))) if k in RATES else 0.0
              for k in base["vmstat"]}  # fmt: skip
    load = {"1": round(rng.uniform(0, 30), 2), "5": round(rng.uniform(0, 20), 2),
            "15": round(rng.uniform(0, 10), 2), "running": rng.randint(1, 40),
            "total": rng.randint(1800, 1900)}  # fmt: skip
    return {"seq": seq, "ts": START + seq, "mem": mem, "psi": psi, "vmstat": vmstat,
            "load": load, "gpu": gpu, "vllm": [vllm]}  # fmt: skip


def _pressure(base: dict[str, Any], seq: int, rng: random.Random) -> dict[str, Any]:
    """A PSI line under load: averages move, the stall total grows (up to 0.3 s a second);
    cpu "full" stays all zeros, as the kernel reports it system-wide."""
    if not base["total"]:
        return base
    return {
        "avg10": round(rng.uniform(0, 50), 2),
        "avg60": round(rng.uniform(0, 20), 2),
        "avg300": round(rng.uniform(0, 5), 2),
        "total": base["total"] + seq * 300_000 + rng.randint(0, 300_000),
    }


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
    measured: list[dict[str, KindUsage]] = []
    lines_before = n_lines = 0
    for minute in range(HOURS * HOUR // 60):
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
        if (minute + 1) % 60 == 0:
            measured.append(usage(kind, factory, settings, now=received))
            if len(measured) == HOURS - 1:
                lines_before = n_lines
    engine.dispose()
    first, last = measured[-2], measured[-1]
    # What the last hour added, per kind: the steady cost, each table's fixed pages counted once
    per_hour = {k: last[k]["bytes"] - (first[k]["bytes"] if k in first else 0) for k in last}
    days = defaults(settings)
    per_day = {k: b * 24 for k, b in per_hour.items()}
    kept = {k: min(days.get(k) or 365, 365) for k in per_day}  # days held in steady state
    month = sum(b * min(30, kept[k]) for k, b in per_day.items())
    year = sum(b * kept[k] for k, b in per_day.items())
    line_kinds = [k for k in ("lines", "kernel_lines") if k in per_hour]
    out = {
        f"{kind}_bytes_per_sample": round(per_hour["samples"] / HOUR),
        f"{kind}_bytes_per_sample_avg": round(last["samples"]["bytes"] / last["samples"]["rows"]),
        f"{kind}_bytes_per_line": round(
            sum(per_hour[k] for k in line_kinds) / max(n_lines - lines_before, 1)
        ),
        f"{kind}_bytes_per_host_day": round(sum(per_day.values())),
        f"{kind}_bytes_per_host_month": round(month),
        f"{kind}_bytes_per_host_year": round(year),
    }
    for name, value in out.items():
        print(f"{name}: {value:,}", flush=True)
    return out


def usage(kind: str, factory: Any, settings: Settings, *, now: float) -> dict[str, KindUsage]:
    """The bench host's rows and bytes per kind (tables and their indexes on disk, shared out
    by rows: ``collector.retention.usage``)."""
    if kind == "postgres":
        db.reclaim_space(factory)  # VACUUM ANALYZE: settled sizes, no dead rows counted
    with db.read_scope(factory) as session:
        host = registry.get_host(session, name="bench")
        kinds = host_usage(measure(session, now=now), host=host, settings=settings)
    return {u["kind"]: u for u in kinds if u["rows"]}


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
