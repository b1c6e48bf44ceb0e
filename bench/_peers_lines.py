"""The line path, freezewatch next to rsyslog on the same records: kernel line → stored latency
at ~20 lines/s (both running), a 50,000-line burst from a file (each side alone), and a burst
into /dev/kmsg (both running: records delivered by each, losses the agent reported)."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from bench import _peers_fw as fw
from bench import _peers_rsyslog as rsyslog
from bench._common import percentile
from bench._peers_kmsg import DEVICE, TAG, Writer, new_nonce, tag
from bench._peers_procs import Procs, run_dir
from bench._peers_sinks import FileSink, Sink
from tests.support.postgres import ThrowawayPostgres

POLL_S = 0.001
SYNC_TIMEOUT_S = 180.0
# A burst is over when every record is stored, or nothing new was stored for this long: longer
# than the agent's HTTP timeout plus its longest retry wait, so a spooled batch still counts.
STALL_S = 60.0


@dataclass
class Seen:
    """When each tagged record of this run was first polled from a sink (perf_counter)."""

    nonce: str
    at: dict[int | str, float] = field(default_factory=dict)

    def take(self, texts: list[str], now: float) -> None:
        for text in texts:
            m = TAG.search(text)
            if m and m[1] == self.nonce:
                key: int | str = int(m[2]) if m[2].isdigit() else m[2]
                self.at.setdefault(key, now)


@dataclass
class Sides:
    """The running sides of one run, keyed ``rsyslog`` / ``fw``, and where records go in."""

    writer: Writer
    sinks: dict[str, Sink]
    pids: dict[str, list[int]]
    procs: Procs
    fw: fw.Freezewatch | None = None

    def poll(self, seen: dict[str, Seen]) -> None:
        for name, sink in self.sinks.items():
            texts = sink.poll()
            if texts:
                seen[name].take(texts, time.perf_counter())

    def sync(self, nonce: str) -> None:
        """A ``ready`` record stored by every side: both caught up with what was already
        there (a fresh reader of /dev/kmsg first replays the whole ring buffer)."""
        seen = {name: Seen(nonce) for name in self.sinks}
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        next_write = 0.0
        while not all("ready" in s.at for s in seen.values()):
            if time.monotonic() > deadline:
                late = [n for n, s in seen.items() if "ready" not in s.at]
                raise RuntimeError(f"{late} did not store a record within {SYNC_TIMEOUT_S} s")
            if time.monotonic() >= next_write:
                self.writer.write(tag(nonce, "ready"))
                next_write = time.monotonic() + 5.0
            self.check_alive()
            self.poll(seen)
            time.sleep(0.01)

    def check_alive(self) -> None:
        for name, pids in self.pids.items():
            for pid in pids:
                if not self.procs.alive(pid):
                    raise RuntimeError(f"{name} (pid {pid}) exited")


@contextmanager
def running(
    which: tuple[str, ...],
    *,
    backend: str,
    pg: ThrowawayPostgres | None,
    device: bool,
) -> Iterator[Sides]:
    """``which`` of ``rsyslog`` / ``fw`` reading /dev/kmsg (``device``) or a fresh file."""
    with run_dir("lines") as (tmp, ps):
        source = DEVICE if device else tmp / "kmsg"
        writer = Writer(source)  # creates the file before either side opens it
        sides = Sides(writer, {}, {}, ps)
        try:
            if "rsyslog" in which:
                rs = rsyslog.start(ps, tmp / "rsyslog", None if device else source)
                sides.sinks["rsyslog"] = FileSink(rs.out)
                sides.pids["rsyslog"] = [rs.sender_pid, rs.receiver_pid]
            if "fw" in which:
                side, _tokens = fw.start(ps, tmp / "fw", backend=backend, pg=pg, kmsg=source)
                assert side.agent_pid is not None
                sides.fw = side
                sides.sinks["fw"] = side.sink
                sides.pids["fw"] = [side.collector_pid, side.agent_pid]
            yield sides
        finally:
            for sink in sides.sinks.values():
                sink.close()
            writer.close()


def latency_run(
    *, backend: str, pg: ThrowawayPostgres | None, device: bool, lines: int, rate: float
) -> dict[str, dict[str, float]]:
    """Both sides on the same records written ~``rate``/s (±20 % jitter); per side the p50 and
    p99 of write → first poll that shows the record, in ms, and how many never came."""
    with running(("rsyslog", "fw"), backend=backend, pg=pg, device=device) as sides:
        nonce = new_nonce()
        sides.sync(nonce)
        seen = {name: Seen(nonce) for name in sides.sinks}
        sent: dict[int, float] = {}
        rng = random.Random(lines)
        next_write = time.perf_counter()
        give_up = None
        while True:
            now = time.perf_counter()
            if len(sent) < lines and now >= next_write:
                sent[len(sent)] = sides.writer.write(tag(nonce, len(sent)))
                next_write += rng.uniform(0.8, 1.2) / rate
            sides.poll(seen)
            if len(sent) == lines:
                if all(all(k in s.at for k in sent) for s in seen.values()):
                    break
                give_up = give_up or now + 30.0
                if now > give_up:
                    break
            time.sleep(POLL_S)
    result = {}
    for name, s in seen.items():
        ms = [(s.at[k] - t) * 1000.0 for k, t in sent.items() if k in s.at]
        result[name] = {
            "p50_ms": statistics.median(ms) if ms else float("nan"),
            "p99_ms": percentile(ms, 0.99) if ms else float("nan"),
            "missing": float(lines - len(ms)),
        }
    return result


def burst_file_run(
    side: str, *, backend: str, pg: ThrowawayPostgres | None, count: int
) -> dict[str, float]:
    """``count`` records appended to a file at once (1,000 a write); one side alone follows
    it. Lines/s from the first write to the poll that saw the last one stored."""
    with running((side,), backend=backend, pg=pg, device=False) as sides:
        nonce = new_nonce()
        sides.sync(nonce)
        return _burst(sides, nonce, count)[side]


def burst_device_run(
    *, backend: str, pg: ThrowawayPostgres | None, count: int
) -> dict[str, dict[str, float]]:
    """``count`` records written to /dev/kmsg as fast as one writer can, both sides reading:
    per side the records delivered, lines/s, and (freezewatch) the losses the agent reported
    (``kmsg_overrun``: the kernel overwrote them before it read them)."""
    with running(("rsyslog", "fw"), backend=backend, pg=pg, device=True) as sides:
        nonce = new_nonce()
        sides.sync(nonce)
        result = _burst(sides, nonce, count)
        assert sides.fw is not None
        result["fw"]["reported_lost"] = float(sides.fw.sink.overrun_lost())
        return result


def _burst(sides: Sides, nonce: str, count: int) -> dict[str, dict[str, float]]:
    """Writes the records, polls every sink until all are stored or ``STALL_S`` without
    progress; per sink: delivered, missing, lines/s up to the last one stored."""
    seen = {name: Seen(nonce) for name in sides.sinks}
    texts = [tag(nonce, k) for k in range(count)]
    t0 = time.perf_counter()
    sides.writer.write_many(texts)
    written = time.perf_counter()
    last_progress = time.monotonic()
    sizes = {name: 0 for name in seen}
    while True:
        sides.poll(seen)
        stored = {name: sum(1 for k in s.at if k != "ready") for name, s in seen.items()}
        if stored != sizes:
            sizes, last_progress = stored, time.monotonic()
        if all(n == count for n in stored.values()):
            break
        if time.monotonic() - last_progress > STALL_S:
            break
        time.sleep(0.005)
    result = {}
    for name, s in seen.items():
        times = [t for k, t in s.at.items() if k != "ready"]
        elapsed = (max(times) - t0) if times else float("nan")
        result[name] = {
            "lines_per_s": len(times) / elapsed if times else 0.0,
            "delivered": float(len(times)),
            "missing": float(count - len(times)),
            "write_s": written - t0,
        }
    return result
