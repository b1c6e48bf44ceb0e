"""Netconsole datagrams/s the collector persists without loss (target >= 20,000/s).

A real collector process (SQLite) with netconsole on; a sender paces extended-format
datagrams over loopback UDP at a target rate for ``seconds`` per step (far longer than the
~20,000 datagrams the 16 MiB socket buffer can hide), then counts the raw rows in
``netconsole_datagrams`` and waits until the records are stored as lines. Rates go up until
a step loses datagrams, cannot keep up (persisted < 90 % of target) or 4 minutes passed.
The figure is the best loss-free persisted rate (rows over the time from the first send to
the last row stored). Last line: a JSON object.

    python bench/netconsole.py [seconds] [rate ...]
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ADMIN, add_host, running_collector
from collector import db
from collector.hosts import registry as hosts
from collector.models import Line, NetconsoleDatagram

BOOT = "bench-boot-0000"
CHUNK = 100  # datagrams sent back to back between pacing checks


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# What a GPU host's kernel prints when it goes down: a driver fault, then a lockup report
# and its stack, over and over. Two lines in twelve are kernel events (Xid, soft lockup).
OOPS = (
    b"NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=vllm, GPU has fallen off the bus.",
    b"watchdog: BUG: soft lockup - CPU#7 stuck for 23s! [python3:4242]",
    b"CPU: 7 PID: 4242 Comm: python3 Tainted: P           OE      6.11.0-1016-nvidia #16",
    b"pc : _nv012345rm+0x1c/0x60 [nvidia]",
    b"lr : _nv043210rm+0x88/0x130 [nvidia]",
    b"Call trace:",
    b" _nv012345rm+0x1c/0x60 [nvidia]",
    b" rm_isr_bh+0x30/0x60 [nvidia]",
    b" nvidia_isr_kthread_bh+0x2c/0x50 [nvidia]",
    b" os_execute_work_item+0x68/0xa0 [nvidia]",
    b" kthread+0x110/0x120",
    b" ret_from_fork+0x10/0x20",
)


def make_datagrams(n: int, first_kseq: int) -> list[bytes]:
    """An oops storm: extended records with msgid and boot userdata, ~150 bytes each."""
    return [
        b"4,%d,%d,-;%s record %d\n msgid=%d\n boot=%s"
        % (k, 1_000_000 + k, OOPS[k % len(OOPS)], k, k, BOOT.encode())
        for k in range(first_kseq, first_kseq + n)
    ]


def allow_loopback(db_url: str) -> None:
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        host = hosts.get_host(session, name="bench")
        hosts.set_netconsole_from(session, host=host, addrs=["127.0.0.1"])
    engine.dispose()


class Counter:
    """Row counts of the collector's database, over one engine for the whole bench."""

    def __init__(self, db_url: str) -> None:
        self._engine = db.make_engine(db_url)
        self._factory = db.make_sessionmaker(self._engine)

    def count(self, model: Any) -> int:
        with db.session_scope(self._factory) as session:
            return session.scalar(select(func.count()).select_from(model)) or 0

    def close(self) -> None:
        self._engine.dispose()


def stats(url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    return httpx.get(url + "/api/v1/netconsole", headers=headers, timeout=10).json()


@dataclass
class Step:
    rate: float  # target send rate
    n: int
    sent_per_s: float  # what the sender achieved
    persisted_per_s: float  # raw rows stored over the time from first send to last stored
    lost: int  # sent but never stored raw
    lines_lag_s: float  # from the last send until every record was stored as a line


def run(url: str, rows: Counter, port: int, n: int, rate: float, first_kseq: int) -> Step:
    """Send ``n`` datagrams paced at ``rate``/s and wait until they are stored."""
    datagrams = make_datagrams(n, first_kseq)
    before, lines_before = rows.count(NetconsoleDatagram), rows.count(Line)
    target = ("127.0.0.1", port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        t0 = time.perf_counter()
        for i in range(0, n, CHUNK):
            for d in datagrams[i : i + CHUNK]:
                s.sendto(d, target)
            ahead = t0 + (i + CHUNK) / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        sent_at = time.perf_counter()
    # Until everything is stored raw, or nothing more arrives for 2 s.
    last, last_change = before, time.perf_counter()
    while last - before < n and time.perf_counter() - last_change <= 2.0:
        time.sleep(0.02)
        now_count = rows.count(NetconsoleDatagram)
        if now_count != last:
            last, last_change = now_count, time.perf_counter()
    stored = last - before
    # Then until the lines caught up, so the next rate starts from an idle collector.
    while stats(url).get("store_queue", 0) > 0 or rows.count(Line) - lines_before < stored:
        if time.perf_counter() - last_change > 60:
            break
        time.sleep(0.05)
    lines_lag = time.perf_counter() - sent_at
    elapsed = max(last_change - t0, sent_at - t0)
    return Step(rate, n, n / (sent_at - t0), stored / elapsed, n - stored, lines_lag)


def main(argv: list[str]) -> int:
    seconds = float(argv[0]) if argv else 5.0
    rates = [float(r) for r in argv[1:]] or [10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0]
    rates += [rates[-1] * 1.25**k for k in range(1, 8)] if not argv[1:] else []
    started = time.monotonic()
    best, lost_at_higher = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        add_host(db_url, "bench")
        allow_loopback(db_url)
        udp = free_udp_port()
        rows = Counter(db_url)
        with running_collector(db_url, FREEZEWATCH_NETCONSOLE_BIND=f"127.0.0.1:{udp}") as url:
            first = stats(url)
            print(f"receiver: {first.get('listening')} rcvbuf {first.get('rcvbuf')}")
            kseq = 0
            for rate in rates:
                # Each step lasts ``seconds``: far more than the socket buffer can hide.
                n = max(int(rate * seconds), 20_000)
                step = run(url, rows, udp, n, rate, kseq)
                kseq += n
                print(
                    f"target {rate:>7.0f}/s: sent {step.sent_per_s:>7.0f}/s, persisted "
                    f"{step.persisted_per_s:>7.0f}/s, lost {step.lost} of {n}, lines stored "
                    f"{step.lines_lag_s:.1f} s after the last send",
                    flush=True,
                )
                if step.lost:
                    lost_at_higher = step.lost
                    break
                best = max(best, step.persisted_per_s)
                if step.persisted_per_s < 0.9 * rate or time.monotonic() - started > 240:
                    break  # not keeping up (the buffer absorbed it) or out of time
            rows.close()
    # "lost" is 0 at the reported rate; lost_at_rate_above is the first step that lost.
    print(
        json.dumps(
            {
                "datagrams_per_s": round(best),
                "lost": 0 if best else lost_at_higher,
                "lost_at_rate_above": lost_at_higher,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
