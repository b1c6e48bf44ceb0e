"""A burst of log lines → all of them stored: lines/s end to end, and how many were lost.

A real collector and a real agent process. ``--source file`` (the default): ``--lines`` lines
are appended to the log file the agent follows (``--vllm-log``) as fast as this script can
write them, one ``write()`` a line; ``--source kmsg``: kmsg-format records appended to the
file the agent follows as its ``--kmsg``; ``--source devkmsg`` (root): written to the real
``/dev/kmsg`` (``printk_devkmsg`` set to ``on`` for the run, then restored) which the agent
reads, where a ring buffer outrun by the writer loses records that the agent must count
(``kmsg_overrun`` events). The clock runs from the first write to the moment the last line is
in the database (polled every 10 ms).

``--db null`` replaces the collector by a stand-in that only reads each POST and answers it
(no database): what the agent alone delivers.

Runs on SQLite and on a throwaway PostgreSQL; the last line is ``{"sqlite_lines_per_s": ..,
"sqlite_lost": .., "postgres_lines_per_s": .., "postgres_lost": .., ...}``.

    python bench/burst.py [--lines 50000] [--db sqlite,postgres,null] [--source file|kmsg|devkmsg]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import httpx
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    add_host,
    cpu_seconds,
    database,
    free_port,
    start_agent,
    start_collector,
)
from collector import db
from collector.models import AgentEvent, Line

HOST = "bench-burst"
POLL_S = 0.01
QUIET_S = 15.0  # no new line for this long: what is missing is lost
DEVKMSG = Path("/dev/kmsg")
PRINTK_DEVKMSG = Path("/proc/sys/kernel/printk_devkmsg")


class Records:
    """What one line is written as: a log line, a kmsg-format record, a /dev/kmsg write."""

    def __init__(self, source: str) -> None:
        self.source, self.kseq, self.usec = source, 0, 10_000_000

    def make(self, text: str) -> bytes:
        if self.source == "file":
            return text.encode() + b"\n"
        if self.source == "devkmsg":
            return b"<6>" + text.encode() + b"\n"
        self.kseq, self.usec = self.kseq + 1, self.usec + 10
        return b"6,%d,%d,-;%s\n" % (self.kseq, self.usec, text.encode())


class Store(Protocol):
    url: str

    def mark(self) -> None: ...
    def arrived(self) -> int: ...
    def numbers(self, marker: str) -> list[int]: ...
    def losses_reported(self) -> int: ...
    def posts(self) -> tuple[float, float]: ...
    def close(self) -> None: ...


class Database:
    """What the real collector stored, read back."""

    def __init__(self, url: str, collector_url: str) -> None:
        self.engine = db.make_engine(url)
        self.url = collector_url
        self.first_id = 0

    def mark(self) -> None:
        """Lines stored from now on are counted by ``arrived``."""
        with self.engine.connect() as conn:
            self.first_id = conn.execute(select(func.coalesce(func.max(Line.id), 0))).scalar_one()

    def arrived(self) -> int:
        """Lines stored since ``mark`` (a primary key range: cheap to poll)."""
        with self.engine.connect() as conn:
            query = select(func.count()).where(Line.id > self.first_id)
            return int(conn.execute(query).scalar_one())

    def numbers(self, marker: str) -> list[int]:
        """The line numbers of the stored lines that carry ``marker``, in seq order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Line.text).where(Line.text.like(f"{marker} %")).order_by(Line.seq)
            ).all()
        return [int(text.rsplit(" ", 1)[1]) for (text,) in rows]

    def losses_reported(self) -> int:
        with self.engine.connect() as conn:
            rows = conn.execute(select(AgentEvent.data).where(AgentEvent.kind == "kmsg_overrun"))
            return sum(int((data or {}).get("lost", 0)) for (data,) in rows)

    def posts(self) -> tuple[float, float]:
        """(ingest requests answered, seconds spent answering them), from /metrics."""
        count = total = 0.0
        for line in httpx.get(self.url + "/metrics", timeout=10).text.splitlines():
            if line.startswith("freezewatch_ingest_request_duration_seconds_count"):
                count = float(line.split()[-1])
            elif line.startswith("freezewatch_ingest_request_duration_seconds_sum"):
                total = float(line.split()[-1])
        return count, total

    def close(self) -> None:
        self.engine.dispose()


class NullCollector:
    """Answers every POST at once and keeps only the marked line numbers it saw (in order)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.requests = 0
        self.lost = 0  # kmsg_overrun events' losses
        self.busy = 0.0
        self.first = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                t0 = time.perf_counter()
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                batch = json.loads(body)
                with owner.lock:
                    owner.lines += [ln["text"] for ln in batch.get("lines", ())]
                    owner.requests += 1
                    for event in batch.get("events", ()):
                        if event.get("kind") == "kmsg_overrun":
                            owner.lost += int(event["data"].get("lost", 0))
                answer = {"stored": {}, "duplicates": {}, "resume": {"kseq": None}}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                owner.busy += time.perf_counter() - t0

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def mark(self) -> None:
        with self.lock:
            self.first = len(self.lines)

    def arrived(self) -> int:
        with self.lock:
            return len(self.lines) - self.first

    def numbers(self, marker: str) -> list[int]:
        with self.lock:
            texts = self.lines[self.first :]
        return [int(t.rsplit(" ", 1)[1]) for t in texts if t.startswith(marker + " ")]

    def losses_reported(self) -> int:
        with self.lock:
            return self.lost

    def posts(self) -> tuple[float, float]:
        return float(self.requests), self.busy

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def collector_for(kind: str, tmp: Path) -> Iterator[tuple[Store, str, int | None]]:
    """(the store to read back, its URL, the collector's pid) for ``kind``."""
    if kind == "null":
        null = NullCollector()
        try:
            yield null, "any-token", None
        finally:
            null.close()
        return
    with database(kind, tmp) as db_url:
        token = add_host(db_url, HOST)
        port = free_port()
        proc = start_collector(db_url, port, tmp / "collector.log")
        store = Database(db_url, f"http://127.0.0.1:{port}")
        try:
            yield store, token, proc.pid
        finally:
            store.close()
            proc.terminate()
            proc.wait(30)


def wait_ready(store: Store, write: Callable[[str], object], marker: str) -> None:
    """Probe lines until one is stored: the agent's reader is at the end of the log."""
    deadline = time.monotonic() + 60
    n = 0
    store.mark()
    while not store.numbers(marker):
        if time.monotonic() > deadline:
            raise RuntimeError("the agent's lines do not arrive")
        write(f"{marker} {n}")
        n += 1
        time.sleep(0.2)


def run(kind: str, source: str, n_lines: int) -> dict[str, float | int]:
    with (
        tempfile.TemporaryDirectory(prefix="fw-burst-") as tmp_name,
        collector_for(kind, Path(tmp_name)) as (store, token, collector_pid),
    ):
        tmp = Path(tmp_name)
        log_file = tmp / "app.log"
        log_file.touch()
        kmsg = DEVKMSG if source == "devkmsg" else tmp / "kmsg"
        if source != "devkmsg":
            kmsg.touch()
        extra = ("--vllm-log", str(log_file)) if source == "file" else ()
        agent = start_agent(store.url, token, HOST, tmp / "agent", kmsg=kmsg, extra=extra)
        run_id = uuid.uuid4().hex[:8]
        fd = os.open(log_file if source == "file" else kmsg, os.O_WRONLY | os.O_APPEND)
        records = Records(source)
        try:
            wait_ready(store, lambda text: os.write(fd, records.make(text)), f"probe-{run_id}")
            marker = f"burst-{run_id} line"
            lines = [records.make(f"{marker} {i}") for i in range(n_lines)]
            lost_before = store.losses_reported()
            store.mark()
            posts0, busy0 = store.posts()
            cpu0 = cpu_seconds(agent.pid)
            ccpu0 = cpu_seconds(collector_pid) if collector_pid else 0.0
            t0 = time.perf_counter()
            for line in lines:
                os.write(fd, line)
            written_s = time.perf_counter() - t0
            # /dev/kmsg also carries the host's own records: there, the end is when it is quiet
            goal = 10**12 if source == "devkmsg" else n_lines
            quiet = 5.0 if source == "devkmsg" else QUIET_S
            stored, last_change, t_end = 0, time.perf_counter(), t0
            while stored < goal and time.perf_counter() - last_change < quiet:
                time.sleep(POLL_S)
                now_stored = store.arrived()
                if now_stored != stored:
                    stored, last_change = now_stored, time.perf_counter()
                    t_end = last_change
            cpu = cpu_seconds(agent.pid) - cpu0
            ccpu = cpu_seconds(collector_pid) - ccpu0 if collector_pid else 0.0
            posts1, busy1 = store.posts()
            numbers = store.numbers(marker)
            lost_reported = store.losses_reported() - lost_before
        finally:
            os.close(fd)
            agent.terminate()
            agent.wait(30)
    distinct = len(set(numbers))
    elapsed = t_end - t0
    rate = distinct / elapsed if elapsed > 0 else 0.0
    ordered = numbers == sorted(numbers)
    report = (
        f"{kind} ({source}): {n_lines} lines written in {written_s:.2f} s "
        f"({n_lines / written_s:,.0f}/s); {distinct} stored in {elapsed:.2f} s = {rate:,.0f} "
        f"lines/s, {'in order' if ordered else 'OUT OF ORDER'}, {len(numbers) - distinct} "
        f"twice, {n_lines - distinct} lost"
    )
    if source == "devkmsg":
        report += f" ({lost_reported} reported lost by the agent)"
    report += f"; agent CPU {cpu:.2f} s ({cpu / n_lines * 1e6:.1f} us a line)"
    if collector_pid:
        report += f", collector CPU {ccpu:.2f} s"
    print(report + f"; {posts1 - posts0:.0f} POSTs answered in {busy1 - busy0:.2f} s", flush=True)
    out: dict[str, float | int] = {
        f"{kind}_lines_per_s": round(rate),
        f"{kind}_lost": n_lines - distinct,
        f"{kind}_duplicates": len(numbers) - distinct,
        f"{kind}_agent_cpu_us_per_line": round(cpu / n_lines * 1e6, 1),
        f"{kind}_posts": round(posts1 - posts0),
        "writer_lines_per_s": round(n_lines / written_s),
    }
    if source == "devkmsg":
        out[f"{kind}_loss_reported"] = lost_reported
    if not ordered:
        out[f"{kind}_out_of_order"] = 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres, null")
    parser.add_argument("--source", choices=("file", "kmsg", "devkmsg"), default="file")
    args = parser.parse_args()
    saved = None
    if args.source == "devkmsg":
        saved = PRINTK_DEVKMSG.read_text().strip()
        PRINTK_DEVKMSG.write_text("on\n")  # a user write is not rate-limited away
    figures: dict[str, float | int | str] = {"source": args.source, "lines": args.lines}
    try:
        for kind in args.db.split(","):
            figures.update(run(kind, args.source, args.lines))
    finally:
        if saved is not None:
            PRINTK_DEVKMSG.write_text(saved + "\n")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
