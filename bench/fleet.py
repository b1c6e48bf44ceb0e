"""A fleet on one collector: N simulated agents posting real batches at 1 Hz, one host in a
kernel storm, hosts going silent during the load.

Each agent is an asyncio client on its own keep-alive connection (no process per host) posting
what the real agent posts: a sample a second read by the agent's own /proc sources from the
fixture tree, with a vLLM metrics entry (its engine's counters moving), real kernel lines from
the corpus under ``tests/fixtures/real`` (~0.2 a second, benign chatter) and a vLLM stats line
every 10 s. The storm host sends ``--storm-rate`` Xid/NVRM fault lines a second, 10 POSTs a
second. During the measured window ``--silent`` hosts stop, one after another.

Per N: ingest latency p50/p99 (POST → answer, client side), the collector's CPU (% of one
core), detection p99 (the silent host's last heartbeat → its signed incident.opened webhook),
incidents of hosts that did not stop (false alarms), and the checker's tick (mean run time of
the ``check_heartbeats`` job on ``/metrics`` during the window; every 0.25 s).

Then the tick against rows stored: the scheduler's tick steps run here against the run's N
hosts (all up), timed with the tables as the run left them and again after ``--bulk-lines``
more kernel lines and a fifth as many samples went in through the ingest path; their ratio
is ``tick_growth`` (1.0: the tick does not grow with rows stored).

    python bench/fleet.py [--hosts 100,500] [--db postgres] [--sqlite-hosts 100]
        [--duration 40] [--silent 10] [--storm-rate 200] [--bulk-lines 500000]
        [--replicas N | --workers N]   # N collectors behind a proxy, or one of N processes

Last line: a JSON object (``detection_p99_s_100``, ``detection_p99_s_500``,
``ingest_p99_ms_500``, ``checker_tick_ms_500``, ... ; ``sqlite_`` prefixed for SQLite).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import event, update

from agent.sources.proc import proc_sources
from agent.wire import INGEST_PATH
from bench._common import FIXTURE_PROC, ROOT, free_port, start_collector
from bench._peers_procs import tree_cpu_seconds
from collector import db
from collector.hosts import registry as hosts
from collector.incidents.lifecycle import settle_incidents
from collector.ingest.batch import ingest_batch
from collector.liveness import checker, suspects
from collector.liveness.collector_runs import release_held_alerts
from collector.liveness.preprobes import PreProbes
from collector.models import Host
from collector.schemas import Batch
from collector.settings import Settings
from collector.timeutil import from_epoch, utcnow
from tests.collector.freeze_support import SECRET
from tests.support.http_receiver import serve_posts
from tests.support.postgres import ThrowawayPostgres, fresh_database
from tests.support.real_corpus import kernel_files
from tests.support.rr_proxy import RoundRobinProxy

BOOT = "7d3c1a52-8c1e-4d4e-9f8a-000000000000"
MTP_LOG = ROOT / "tests" / "fixtures" / "vllm" / "v0.20.2_mtp_gb10.log"
STATS_LINE = next(ln for ln in MTP_LOG.read_text().splitlines() if "Avg prompt throughput" in ln)
WARMUP_S = 10.0
STORM = "storm"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if values else 0.0


def corpus() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(benign kernel lines, fault lines) from the real corpus, as wire lines (no seq/ts)."""
    benign, faults = [], []
    for f in kernel_files():
        for expect, text in zip(f.labels, f.lines, strict=True):
            head, sep, body = text.partition(";")
            parts = head.split(",")
            prio = int(parts[0]) & 7 if sep and parts[0].isdigit() else 6
            line = {"source": "kmsg", "priority": prio, "text": body if sep else text}
            (benign if expect.kind is None else faults).append(line)
    return benign, faults


def real_sample() -> dict[str, Any]:
    """What the agent's /proc sources read from the fixture tree."""
    out: dict[str, Any] = {}
    for source in proc_sources(FIXTURE_PROC):
        source.read()
        out[source.name] = source.read()  # vmstat: a rate needs two reads
    return out


@dataclass
class Agent:
    """One simulated host: posts a batch every ``interval`` until told to stop or go silent."""

    name: str
    token: str
    interval: float = 1.0
    lines_per_s: float = 0.2
    silent_at: float | None = None
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seq: int = 0
    kseq: int = 0
    owed: float = 0.0
    went_silent: float | None = None
    vllm: bool = True

    def batch(self, now: float, sample: dict[str, Any], pool: list[dict[str, Any]]) -> bytes:
        self.seq += 1
        tokens = 1000.0 + now * 7 % 1000
        vllm = {"url": "http://127.0.0.1:8000", "health": 200, "running": 1, "waiting": 0}
        vllm |= {"generation_tokens": tokens, "prompt_tokens": tokens * 3, "kv_usage": 0.04}
        samples = []
        if self.interval >= 1.0 or self.seq % round(1 / self.interval) == 0:
            samples = [{**sample, "seq": self.seq, "ts": now}]
            if self.vllm:
                samples[0]["vllm"] = [vllm]
        lines = []
        self.owed += self.lines_per_s * self.interval
        while self.owed >= 1:
            self.owed -= 1
            self.kseq += 1
            line = random.choice(pool)
            lines.append(
                {**line, "seq": self.seq * 1000 + len(lines), "ts": now, "kseq": self.kseq}
            )
        if self.seq % 10 == 0 and self.interval >= 1.0:
            text = STATS_LINE
            lines.append({"seq": self.seq * 1000 + 999, "ts": now, "source": "vllm", "text": text})
        body = {
            "host": self.name,
            "boot_id": BOOT,
            "agent": {"version": "bench", "pid": 1, "started_at": 1.0, "sent_at": now},
            "samples": samples,
            "lines": lines,
            "events": [],
        }
        return json.dumps(body).encode()

    async def run(
        self, port: int, stop_at: float, sample: dict[str, Any], pool: list[dict[str, Any]]
    ) -> None:
        await asyncio.sleep(random.random() * self.interval)
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        next_at = time.monotonic()
        while time.time() < stop_at:
            now = time.time()
            if self.silent_at is not None and now >= self.silent_at:
                self.went_silent = now
                break
            body = self.batch(now, sample, pool)
            head = (
                f"POST {INGEST_PATH} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self.token}"
                f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            try:
                if conn is None:
                    conn = await asyncio.open_connection("127.0.0.1", port)
                started = time.perf_counter()
                conn[1].write(head.encode() + body)
                await conn[1].drain()
                status = await _answer(conn[0])
                if status == 200:
                    self.latencies.append(time.perf_counter() - started)
                else:
                    self.errors += 1
            except (OSError, asyncio.IncompleteReadError):
                self.errors += 1
                conn = None
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if conn is not None:
            conn[1].close()


async def _answer(reader: asyncio.StreamReader) -> int:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    length = next(
        (int(h.split(":", 1)[1]) for h in head if h.lower().startswith("content-length:")), 0
    )
    await reader.readexactly(length)
    return int(head[0].split()[1])


@contextmanager
def webhooks() -> Iterator[tuple[str, list[tuple[float, dict[str, Any]]]]]:
    """A webhook target recording (arrival time, body) of each POST."""
    got: list[tuple[float, dict[str, Any]]] = []

    def handle(_path: str, _headers: dict[str, str], raw: bytes) -> int:
        got.append((time.time(), json.loads(raw)))
        return 200

    with serve_posts(handle) as port:
        yield f"http://127.0.0.1:{port}/hook", got


def register(db_url: str, names: list[str]) -> dict[str, str]:
    db.migrate(db_url)
    engine = db.make_engine(db_url)
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            return {name: hosts.create_host(session, name=name)[1] for name in names}
    finally:
        engine.dispose()


def cpu_seconds(procs: list[subprocess.Popen[bytes]]) -> float:
    """utime + stime of the collector processes, their workers included."""
    return sum(tree_cpu_seconds(proc.pid) for proc in procs)


def tick_seconds(urls: list[str]) -> tuple[float, int]:
    """(sum, count) of the checker job's run times so far, from /metrics (only the leader
    among replicas runs it)."""
    found = {"sum": 0.0, "count": 0.0}
    for url in urls:
        for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
            for key in found:
                name = f'freezewatch_job_duration_seconds_{key}{{job="check_heartbeats"}}'
                if line.startswith(name):
                    found[key] += float(line.rsplit(" ", 1)[1])
    return found["sum"], int(found["count"])


def run_fleet(db_url: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    names = [f"fleet-{i:03d}" for i in range(n)]
    tokens = register(db_url, [*names, STORM])
    benign, faults = corpus()
    sample = real_sample()
    silent = names[:: max(1, n // args.silent)][: args.silent]
    replicas = args.replicas if db_url.startswith("postgresql") else 1
    workers = args.workers if db_url.startswith("postgresql") else 1
    ports = [free_port() for _ in range(replicas)]
    with webhooks() as (hook, received), ExitStack() as stack:
        procs = [
            start_collector(
                db_url,
                p,
                args.log,
                FREEZEWATCH_WEBHOOK_URLS=f"{hook}|json|{SECRET}",
                FREEZEWATCH_WORKERS=str(workers),
            )
            for p in ports
        ]
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        port = ports[0]
        if len(ports) > 1:  # replicas on one database behind a round-robin proxy
            port = stack.enter_context(RoundRobinProxy(urls)).port
        try:
            start = time.time()
            window = (start + WARMUP_S, start + WARMUP_S + args.duration)
            step = args.duration / (len(silent) + 1)
            agents = [
                Agent(
                    name,
                    tokens[name],
                    vllm=not args.no_vllm,
                    silent_at=window[0] + step * (silent.index(name) + 1)
                    if name in silent
                    else None,
                )
                for name in names
            ]
            storm = Agent(STORM, tokens[STORM], interval=0.1, lines_per_s=args.storm_rate)
            marks: dict[str, Any] = {}

            async def measure() -> None:
                await asyncio.sleep(window[0] - time.time())
                marks["cpu0"], marks["t0"] = cpu_seconds(procs), time.monotonic()
                marks["answered"] = -sum(len(a.latencies) for a in [*agents, storm])
                marks["tick0"] = await asyncio.to_thread(tick_seconds, urls)
                await asyncio.sleep(window[1] - time.time())
                marks["cpu1"], marks["t1"] = cpu_seconds(procs), time.monotonic()
                marks["answered"] += sum(len(a.latencies) for a in [*agents, storm])
                marks["tick1"] = await asyncio.to_thread(tick_seconds, urls)

            stop_at = window[1] + args.detect_wait

            async def load() -> None:
                await asyncio.gather(
                    measure(),
                    storm.run(port, stop_at, sample, faults),
                    *(a.run(port, stop_at, sample, benign) for a in agents),
                )

            client_cpu = time.process_time()
            asyncio.run(load())
            client_cpu = time.process_time() - client_cpu
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
    opened: dict[str, tuple[float, dict[str, Any]]] = {}
    for at, body in received:
        if body.get("event") == "incident.opened":
            opened.setdefault(body["host"]["name"], (at, body["incident"]))
    stopped = [a for a in agents if a.went_silent]
    detections = [
        opened[a.name][0] - opened[a.name][1]["last_heartbeat_at"]
        for a in stopped
        if a.name in opened
    ]
    missed = [a.name for a in stopped if a.name not in opened]
    # While every agent still posts: once they stop at the end, every host is silent for real.
    false_alarms = sorted(
        name
        for name, (at, _incident) in opened.items()
        if at < stop_at and name not in {a.name for a in stopped}
    )
    latencies = [x for a in [*agents, storm] for x in a.latencies]
    in_window = marks["t1"] - marks["t0"]
    ticks = marks["tick1"][1] - marks["tick0"][1]
    tick_ms = (marks["tick1"][0] - marks["tick0"][0]) / max(ticks, 1) * 1000
    figures = {
        "ingest_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "ingest_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "requests_per_s": round(len(latencies) / (window[1] + args.detect_wait - start), 1),
        "errors": sum(a.errors for a in [*agents, storm]),
        "collector_cpu_percent": round((marks["cpu1"] - marks["cpu0"]) / in_window * 100, 1),
        "collector_cpu_ms_per_request": round(
            (marks["cpu1"] - marks["cpu0"]) / max(marks["answered"], 1) * 1000, 1
        ),
        "client_cpu_percent": round(client_cpu / (time.time() - start) * 100, 1),
        "detection_p50_s": round(statistics.median(detections), 2) if detections else -1.0,
        "detection_p99_s": round(percentile(detections, 0.99), 2) if detections else -1.0,
        "detected": len(detections),
        "missed": len(missed),
        "false_incidents": len(false_alarms),
        "checker_tick_ms": round(tick_ms, 2),
        "checker_ticks": ticks,
    }
    print(f"  N={n}: {figures}", flush=True)
    return figures


def tick_growth(db_url: str, n: int, bulk_lines: int) -> dict[str, float]:
    """The scheduler's tick steps, here, with the tables as they are and with many more rows."""
    engine = db.make_engine(db_url)
    sf = db.make_sessionmaker(engine)
    settings = Settings(db_url=db_url)
    pre = PreProbes()
    with db.session_scope(sf) as s:  # every host heard from just now, for the whole test
        s.execute(update(Host).values(status="up", overdue_at=utcnow() + timedelta(days=1)))

    def one() -> None:
        now = utcnow()
        suspects.start_pre_probes(sf, now=now, settings=settings, pre_probes=pre, run=lambda t: [])
        checker.check_heartbeats(
            sf, now=now, settings=settings, probe_runner=lambda t: [], pre_probes=pre
        )
        settle_incidents(sf, now=now, settings=settings)
        release_held_alerts(sf, now=now, settings=settings)

    def timed(batches: int = 10, rounds: int = 20) -> tuple[float, int]:
        """(ms a tick: the quickest batch's mean, robust to a busy machine; statements a
        tick)."""
        one()
        sent: list[str] = []

        def note(*args: Any) -> None:
            sent.append(args[2])

        event.listen(engine, "before_cursor_execute", note)
        one()
        event.remove(engine, "before_cursor_execute", note)
        best = float("inf")
        for _ in range(batches):
            started = time.perf_counter()
            for _ in range(rounds):
                one()
            best = min(best, (time.perf_counter() - started) / rounds * 1000)
        return best, len(sent)

    small, small_statements = timed()
    _, faults = corpus()
    sample = real_sample()
    chunk, t0 = 5000, time.time() - 86400
    with db.session_scope(sf) as s:
        host = s.get(Host, 1)
        assert host is not None
        name = host.name
    for b in range(bulk_lines // chunk):
        seq = 10**9 + b * chunk
        lines = [
            {**random.choice(faults), "seq": seq + i, "ts": t0 + (seq + i) / 1e4, "kseq": seq + i}
            for i in range(chunk)
        ]
        lines = [{**ln, "source": "journal"} for ln in lines]  # stored, not classified
        samples = [
            {**sample, "seq": seq + i, "ts": t0 + (seq + i) / 1e4} for i in range(chunk // 5)
        ]
        body = {
            "host": name,
            "boot_id": BOOT,
            "agent": {"version": "bench", "pid": 1, "started_at": 1.0},
            "samples": samples,
            "lines": lines,
        }
        batch = Batch.model_validate(body)
        with db.session_scope(sf) as s:
            row = s.get(Host, 1)
            assert row is not None
            ingest_batch(
                s, host_id=row.id, batch=batch, received_at=time.time(),
                now=from_epoch(time.time()), settings=settings,
            )  # fmt: skip
    with db.session_scope(sf) as s:  # back to all up: the bulk batches were heartbeats too
        s.execute(update(Host).values(status="up", overdue_at=utcnow() + timedelta(days=1)))
    large, large_statements = timed()
    pre.shutdown()
    engine.dispose()
    out = {
        "tick_ms_small": round(small, 3),
        "tick_ms_large": round(large, 3),
        "tick_growth": round(large / small, 2),
        "tick_statements_small": small_statements,
        "tick_statements_large": large_statements,
        "bulk_lines": bulk_lines,
    }
    print(f"  tick with N={n} hosts: {out}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", default="100,500")
    parser.add_argument("--db", default="postgres", help="postgres, sqlite or both")
    parser.add_argument("--sqlite-hosts", default="100", help="N values run on SQLite")
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--detect-wait", type=float, default=12.0)
    parser.add_argument("--silent", type=int, default=10)
    parser.add_argument("--storm-rate", type=float, default=200.0)
    parser.add_argument("--bulk-lines", type=int, default=500_000)
    parser.add_argument("--no-vllm", action="store_true", help="samples without a vLLM entry")
    parser.add_argument(
        "--replicas", type=int, default=1, help="collector processes behind a round-robin proxy"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="PostgreSQL: each collector's serve --workers"
    )
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "fleet.log")
    args = parser.parse_args()
    result: dict[str, float] = {}
    kinds = ["postgres", "sqlite"] if args.db == "both" else [args.db]
    cluster: list[ThrowawayPostgres] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            sizes = [
                int(x) for x in (args.sqlite_hosts if kind == "sqlite" else args.hosts).split(",")
            ]
            prefix = "sqlite_" if kind == "sqlite" else ""
            print(f"{kind}:", flush=True)
            for n in sizes:
                with database(kind, Path(tmp), n, cluster) as url:
                    for key, value in run_fleet(url, n, args).items():
                        result[f"{prefix}{key}_{n}"] = value
                    if n == max(sizes):
                        for key, value in tick_growth(url, n, args.bulk_lines).items():
                            result[f"{prefix}{key}"] = value
    for server in cluster:
        server.stop()
    print(json.dumps(result))
    return 0


@contextmanager
def database(kind: str, tmp: Path, n: int, cluster: list[ThrowawayPostgres]) -> Iterator[str]:
    """A fresh database per run: an SQLite file, or a database on one throwaway cluster."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / f'fleet-{n}.db'}"
        return
    if not cluster:
        cluster.append(ThrowawayPostgres())
        cluster[0].start()
    yield fresh_database(cluster[0].admin_url)


if __name__ == "__main__":
    sys.exit(main())
