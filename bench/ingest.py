"""Sustained ingest through the real HTTP endpoint, batches of 1,000, SQLite and PostgreSQL,
against what the database itself takes in the same run.

Per backend: lines/s posted to a collector process, and the same lines, as the rows ingest
stores, inserted straight through the driver (the bulk statement ingest uses: INSERT ... ON
CONFLICT DO NOTHING on SQLite, COPY on PostgreSQL), one transaction a batch, as many writers as
HTTP clients, rows built beforehand: the storage engine's own limit. The two take turns, a
quarter of their batches at a time, so that both figures come from the same stretches of a
noisy machine. ``http_efficiency`` = HTTP lines/s / driver lines/s. Then samples/s posted.
Beside them, the CPU each process spent per line stored over HTTP (the collector; the
PostgreSQL server, its backends included; this process, the client) and each one's share of a
core: where the time of a request goes; and over the driver's turns, the server's and the
writers' (this process's) CPU per line: what storing a line costs without the collector.
``--replicas N``: N collector processes on the PostgreSQL database, the clients spread over
them (the layout of two collectors on one PostgreSQL, without the proxy). ``--workers N``: one
collector on PostgreSQL, ``serve --workers N`` (N processes on its one port); ``--clients N``:
connections posting at once (2), and as many writers through the driver. The last line is a
JSON object of them all.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.http11 import Connection
from agent.wire import INGEST_PATH
from bench._common import add_host, running_collector_process
from bench._peers_fw import postmaster_pid
from bench._peers_procs import tree_cpu_seconds
from collector import db
from collector.hosts import registry as hosts
from collector.ingest.rows import LINE_COLUMNS, agent_line_rows
from collector.models import Line, table_of
from collector.schemas import Batch

BATCH = 1000
BATCHES = 200  # per client and side: 200,000 lines each
ROUNDS = 4  # slices of each side, taken in turn (``in_turns``)
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


def connect(url: str) -> Connection:
    """A kept-alive connection to the collector at ``url``: the agent's own HTTP client, what
    posts batches in production. (httpx cost about 1 ms more CPU a 1,000-line request, on the
    cores the collector and its database share.)"""
    where = urllib.parse.urlsplit(url)
    return Connection(where.hostname or "127.0.0.1", where.port, timeout=60)


def post(conn: Connection, token: str, body: bytes) -> dict[str, Any]:
    """POST one batch; the collector's answer (anything but a 200 raises)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request("POST", INGEST_PATH, body, headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"HTTP {answer.status}: {data[:300]!r}")
    result: dict[str, Any] = json.loads(data)
    return result


def run(urls: list[str], token: str, kind: str, cpu: Meter | None = None) -> float:
    """Lines (or samples) stored a second, CLIENTS posting at once, each on one connection;
    client ``c`` posts to ``urls[c % len(urls)]`` (replicas). ``cpu`` reads its processes over
    the posting, bodies already made."""
    with Posting(urls, token, kind) as posting:
        posting.writers.take(len(posting.writers.items[0]), cpu)
        return posting.writers.rate


class Writers:
    """CLIENTS writers at once, writer ``c`` storing its next item of ``items[c]`` with
    ``store(c, item)`` (how many it stored). ``take`` runs a slice of them; the totals (items
    stored, seconds spent) add up over the slices."""

    def __init__(self, items: list[list[Any]], store: Callable[[int, Any], int]) -> None:
        self.items, self.store = items, store
        self.next = [0] * len(items)
        self.stored, self.seconds = 0, 0.0

    def take(self, count: int, cpu: Meter | None = None) -> None:
        """The next ``count`` items of each writer (fewer where its items run out); ``cpu``
        reads its processes over the slice."""
        counts = [0] * CLIENTS

        def worker(c: int) -> None:
            first = self.next[c]
            for item in self.items[c][first : first + count]:
                counts[c] += self.store(c, item)
                self.next[c] += 1

        meter = cpu or Meter({})
        with meter:
            self.seconds += in_threads(worker)  # first: ``sum(counts)`` sums once they ran
        meter.count += sum(counts)
        self.stored += sum(counts)

    @property
    def rate(self) -> float:
        return self.stored / self.seconds if self.seconds else 0.0


class Posting:
    """CLIENTS kept-alive connections posting ``kind`` batches to the collector(s) at ``urls``
    (client ``c`` to ``urls[c % len(urls)]``, replicas), bodies made beforehand."""

    def __init__(self, urls: list[str], token: str, kind: str, batches: int = 200) -> None:
        self.urls, self.token, self.kind = urls, token, kind
        self.connections: list[Connection] = []
        self.writers = Writers([make_bodies(kind, c, batches) for c in range(CLIENTS)], self.post)

    def post(self, c: int, body: bytes) -> int:
        stored: int = post(self.connections[c], self.token, body)["stored"][self.kind]
        return stored

    def __enter__(self) -> Posting:
        self.connections = [connect(self.urls[c % len(self.urls)]) for c in range(CLIENTS)]
        return self

    def __exit__(self, *_exc: object) -> None:
        for conn in self.connections:
            conn.close()


class Meter:
    """CPU seconds each named process spent inside the ``with`` blocks, and their wall time
    (added up over blocks: one meter can read several slices of a run)."""

    def __init__(self, readers: dict[str, Callable[[], float]]) -> None:
        self.readers = readers
        self.spent: dict[str, float] = dict.fromkeys(readers, 0.0)
        self.wall = 0.0
        self.count = 0  # the items the blocks stored, added by their user

    def __enter__(self) -> Meter:
        self._start = {name: read() for name, read in self.readers.items()}
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wall += time.monotonic() - self._t0
        for name, read in self.readers.items():
            self.spent[name] += read() - self._start[name]

    def per_item_us(self) -> dict[str, float]:
        return {name: 1e6 * cpu / max(self.count, 1) for name, cpu in self.spent.items()}

    def core_pct(self) -> dict[str, float]:
        return {name: 100.0 * cpu / max(self.wall, 1e-9) for name, cpu in self.spent.items()}


def in_threads(worker: Callable[[int], None]) -> float:
    """Seconds ``worker(c)`` took, run at once for each of the CLIENTS."""
    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


def line_rows(db_url: str, count: int) -> list[list[list[tuple[Any, ...]]]]:
    """The rows of ``make_bodies``' line batches as ingest stores them, for another host."""
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        host, _token = hosts.create_host(session, name="bench-driver")
        common = (host.id, hosts.boot_pk(session, host=host, boot_id=BOOT), time.time())
    engine.dispose()
    per_client = []
    for c in range(CLIENTS):
        batches = []
        for body in make_bodies("lines", c, count):
            batch = Batch.model_validate_json(body)
            batches.append(agent_line_rows(common, batch.lines, batch.escaped_lines))
        per_client.append(batches)
    return per_client


class Driver:
    """CLIENTS writers inserting ``batches`` (``line_rows``) straight through the driver with
    ingest's bulk statement, one transaction a batch: the storage engine's own limit."""

    def __init__(self, db_url: str, batches: list[list[list[tuple[Any, ...]]]]) -> None:
        self.engine = db.make_engine(db_url)
        self.factory = db.make_sessionmaker(self.engine)
        self.writers = Writers(batches, self.insert)

    def insert(self, _c: int, rows: list[tuple[Any, ...]]) -> int:
        with db.session_scope(self.factory) as session:
            return db.insert_ignoring_duplicates(session, table_of(Line), LINE_COLUMNS, rows)

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.engine.dispose()


def driver_run(db_url: str, batches: list[list[list[tuple[Any, ...]]]]) -> float:
    """Lines/s of ``batches`` inserted through the driver, CLIENTS writers at once."""
    with Driver(db_url, batches) as driver:
        driver.writers.take(len(batches[0]))
        return driver.writers.rate


def in_turns(http: Writers, driver: Writers, cpu: Meter, driver_cpu: Meter | None = None) -> None:
    """HTTP and driver slices in turn, ROUNDS of each: on a machine whose speed swings by half
    from one 10 s to the next, both figures then come from the same stretches of time.
    ``cpu`` reads its processes over the HTTP slices, ``driver_cpu`` over the driver's."""
    per_round = -(-len(http.items[0]) // ROUNDS)
    for _ in range(ROUNDS):
        http.take(per_round, cpu)
        driver.take(per_round, driver_cpu)


def bench_backend(
    name: str, db_url: str, server_pid: int | None = None, replicas: int = 1, workers: int = 1
) -> dict[str, float]:
    """``server_pid``: the database server's process (PostgreSQL's postmaster), metered too.
    ``replicas``: collector processes on the database (PostgreSQL), a client to each in turn;
    ``workers``: each one's ``serve --workers``. Their CPU, workers included, is the
    collector's."""
    # An hour's grace: the bench posts nothing while it builds the next part's bodies
    # (seconds); at the default grace the host went late, and an incident's snapshot and
    # probes were metered as ingest.
    token = add_host(db_url, "bench", grace_s=3600.0)
    env = {"FREEZEWATCH_WORKERS": str(workers)}
    with ExitStack() as stack:
        started = [
            stack.enter_context(running_collector_process(db_url, **env)) for _ in range(replicas)
        ]
        urls, pids = [url for url, _ in started], [proc.pid for _, proc in started]
        readers: dict[str, Callable[[], float]] = {
            "collector": lambda: sum(tree_cpu_seconds(pid) for pid in pids),
            "client": time.process_time,
        }
        if server_pid is not None:
            readers["server"] = partial(tree_cpu_seconds, server_pid)
        cpu = Meter(readers)
        # Over the driver's turns this process is the writers (the HTTP clients wait).
        direct: dict[str, Callable[[], float]] = {"writers": time.process_time}
        if server_pid is not None:
            direct["server"] = readers["server"]
        direct_cpu = Meter(direct)
        with (
            Posting(urls, token, "lines", BATCHES) as posting,
            Driver(db_url, line_rows(db_url, BATCHES)) as driver_side,
        ):
            in_turns(posting.writers, driver_side.writers, cpu, direct_cpu)
        lines, driver = posting.writers.rate, driver_side.writers.rate
        samples = run(urls, token, "samples")
    efficiency = lines / driver
    per_line, share = cpu.per_item_us(), cpu.core_pct()
    print(
        f"{name}: {lines:,.0f} lines/s, {samples:,.0f} samples/s over HTTP; "
        f"{driver:,.0f} lines/s through the driver; http_efficiency {efficiency:.2f}",
        flush=True,
    )
    print(
        f"{name}: CPU per line over HTTP "
        + ", ".join(
            f"{who} {per_line[who]:.2f} µs ({share[who]:.0f} % of a core)" for who in readers
        ),
        flush=True,
    )
    per_row, direct_share = direct_cpu.per_item_us(), direct_cpu.core_pct()
    print(
        f"{name}: CPU per line through the driver "
        + ", ".join(
            f"{who} {per_row[who]:.2f} µs ({direct_share[who]:.0f} % of a core)" for who in direct
        ),
        flush=True,
    )
    return {
        f"{name}_lines_per_s": round(lines),
        f"{name}_samples_per_s": round(samples),
        f"{name}_driver_lines_per_s": round(driver),
        f"{name}_http_efficiency": round(efficiency, 3),
        **{f"{name}_{who}_us_per_line": round(per_line[who], 2) for who in readers},
        **{f"{name}_{who}_core_pct": round(share[who], 1) for who in readers},
        **{f"{name}_driver_{who}_us_per_line": round(per_row[who], 2) for who in direct},
        **{f"{name}_driver_{who}_core_pct": round(direct_share[who], 1) for who in direct},
    }


def main() -> None:
    global CLIENTS  # one setting for every writer of the run, HTTP and driver
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="collector processes on PostgreSQL (the HA layout; SQLite has one writer)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="PostgreSQL: each collector's serve --workers"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=CLIENTS,
        help=f"connections posting at once, and writers through the driver ({CLIENTS})",
    )
    args = parser.parse_args()
    CLIENTS = args.clients
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        figures |= bench_backend("sqlite", f"sqlite:///{tmp}/bench.db")
    from tests.support.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as pg:
        figures |= bench_backend(
            "postgres", pg.url, postmaster_pid(pg), args.replicas, args.workers
        )
    if args.replicas > 1:
        figures["postgres_replicas"] = args.replicas
    if args.workers > 1:
        figures["postgres_workers"] = args.workers
    figures["clients"] = CLIENTS
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
