"""Netconsole datagrams/s the collector persists without loss (target >= 20,000/s).

A real collector (SQLite) with netconsole on; a sender paces N extended-format datagrams over
loopback UDP at a target rate, then the raw datagrams in the database are counted. Rates are
tried from high to low; the figure is the best loss-free sustained rate (persisted datagrams
over the time from the first send to the last one stored). Last line: a JSON object.

    python bench/netconsole.py [N] [rate ...]
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ADMIN, add_host, running_collector
from collector import db
from collector.models import Host, NetconsoleDatagram
from collector.schemas import HostPatch
from collector.services import hosts

BOOT = "bench-boot-0000"
CHUNK = 100  # datagrams sent back to back between pacing checks


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_datagrams(n: int, first_kseq: int) -> list[bytes]:
    """An oops-like storm: extended records with msgid and boot userdata, ~150 bytes each."""
    return [
        b"4,%d,%d,-;NVRM: Xid (PCI:000f:01:00): 79, pid=4242, name=vllm, GPU has fallen off "
        b"the bus. record %d\n msgid=%d\n boot=%s" % (k, 1_000_000 + k, k, k, BOOT.encode())
        for k in range(first_kseq, first_kseq + n)
    ]


def allow_loopback(db_url: str) -> None:
    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        host = hosts.get_host(session, name="bench")
        hosts.update_host(session, host=host, patch=HostPatch(netconsole_from=["127.0.0.1"]))
    engine.dispose()


def persisted(db_url: str) -> int:
    from sqlalchemy import func, select

    engine = db.make_engine(db_url)
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        count = session.scalar(select(func.count()).select_from(NetconsoleDatagram)) or 0
        session.scalar(select(Host.id))
    engine.dispose()
    return count


def stats(url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    return httpx.get(url + "/api/v1/netconsole", headers=headers, timeout=10).json()


def run(
    url: str, db_url: str, port: int, n: int, rate: float, first_kseq: int
) -> tuple[float, int]:
    """Send ``n`` datagrams at ``rate``/s; returns (sustained persisted rate, lost)."""
    datagrams = make_datagrams(n, first_kseq)
    before = persisted(db_url)
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
        sent_s = time.perf_counter() - t0
    # Wait until everything is stored, or nothing more arrives for 2 s.
    last, last_change, done_at = before, time.perf_counter(), time.perf_counter()
    while True:
        now_count = persisted(db_url)
        now = time.perf_counter()
        if now_count != last:
            last, last_change, done_at = now_count, now, now
        if last - before >= n or now - last_change > 2.0:
            break
        time.sleep(0.05)
    stored = last - before
    # Let the record store catch up, so the next rate starts from an idle collector.
    while stats(url).get("store_queue", 0) > 0:
        time.sleep(0.1)
    elapsed = max(done_at - t0, sent_s)
    return stored / elapsed, n - stored


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    rates = [float(r) for r in argv[1:]] or [60_000.0, 40_000.0, 25_000.0, 20_000.0, 10_000.0]
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        add_host(db_url, "bench")
        allow_loopback(db_url)
        udp = free_udp_port()
        with running_collector(db_url, FREEZEWATCH_NETCONSOLE_BIND=f"127.0.0.1:{udp}") as url:
            first = stats(url)
            print(f"receiver: {first.get('listening')} rcvbuf {first.get('rcvbuf')}")
            best, best_lost, kseq = 0.0, n, 0
            for rate in rates:
                got, lost = run(url, db_url, udp, n, rate, kseq)
                kseq += n
                print(f"target {rate:>8.0f}/s: persisted {got:>8.0f}/s, lost {lost} of {n}")
                if lost == 0:
                    best, best_lost = got, 0
                    break
                best_lost = min(best_lost, lost)
    print(json.dumps({"datagrams_per_s": round(best), "lost": best_lost}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
