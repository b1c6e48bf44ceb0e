"""UDP netconsole receiver thread: persist raw datagrams in batches first, then parse.

The kernel sends from printk context with no retransmit, so the only loss this side can
prevent is socket-buffer overflow during an oops burst: a big ``SO_RCVBUF``, a loop that
drains everything readable per wake-up, and parsing only after the raw batch is handed off.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from collector.netconsole.parse import NetconsoleRecord, parse_datagram
from collector.netconsole.reassembly import Reassembler

log = logging.getLogger(__name__)

DEFAULT_PORT = 6666
DEFAULT_RCVBUF = 8 * 1024 * 1024
_MAX_DATAGRAM = 65535


@dataclass(frozen=True)
class RawDatagram:
    """One allowlisted datagram as received, before any parsing."""

    raw: bytes
    addr: tuple[str, int]
    received_at: float  # collector wall clock, epoch seconds
    host: str


@dataclass(frozen=True)
class ReceivedRecord:
    """A parsed (and, for fragments, reassembled) record with where and when it came."""

    host: str
    addr: tuple[str, int]
    received_at: float  # arrival of the first datagram of this record
    record: NetconsoleRecord


@dataclass
class ReceiverStats:
    rcvbuf_requested: int = 0
    rcvbuf_granted: int = 0  # as getsockopt reports it (Linux doubles the request)
    datagrams: int = 0  # allowlisted datagrams handed to persist_raw
    batches: int = 0
    records: int = 0
    unknown: Counter[str] = field(default_factory=Counter)  # dropped, per source address
    persist_errors: int = 0
    callback_errors: int = 0


class NetconsoleReceiver:
    """Bind, drain, persist raw, parse, hand records on; ``start()`` / ``stop()``."""

    def __init__(
        self,
        bind: tuple[str, int] = ("0.0.0.0", DEFAULT_PORT),
        *,
        persist_raw: Callable[[list[RawDatagram]], None],
        on_records: Callable[[list[ReceivedRecord]], None],
        resolve_host: Callable[[str], str | None],
        rcvbuf: int = DEFAULT_RCVBUF,
        reassembler: Reassembler | None = None,
        clock: Callable[[], float] = time.time,
        max_batch: int = 20_000,
        tick_s: float = 0.25,
    ) -> None:
        self._bind = bind
        self._persist_raw = persist_raw
        self._on_records = on_records
        self._resolve_host = resolve_host
        self._rcvbuf = rcvbuf
        self._reassembler = reassembler or Reassembler()
        self._clock = clock
        self._max_batch = max_batch
        self._tick_s = tick_s
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = ReceiverStats(rcvbuf_requested=rcvbuf)

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); valid after ``start()`` (useful with port 0)."""
        assert self._sock is not None, "start() first"
        return self._sock.getsockname()[:2]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Bind and start the thread; bind errors raise here, not in the thread."""
        self._sock = self._open_socket()
        self._thread = threading.Thread(target=self._run, name="netconsole-rx", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop, emit still-pending fragments as incomplete, close the socket."""
        self._stopping.set()
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout)
        self._deliver(self._reassembler.flush_all())
        if self._sock is not None:
            self._sock.close()
        self._wake_r.close()
        self._wake_w.close()

    def _open_socket(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._bind[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        # SO_RCVBUFFORCE passes rmem_max when we have CAP_NET_ADMIN; otherwise the cap applies.
        force = getattr(socket, "SO_RCVBUFFORCE", None)
        try:
            if force is None:
                raise PermissionError
            sock.setsockopt(socket.SOL_SOCKET, force, self._rcvbuf)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcvbuf)
        self.stats.rcvbuf_granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        sock.bind(self._bind)
        sock.setblocking(False)
        log.info(
            "netconsole receiver on %s: SO_RCVBUF requested %d, granted %d",
            sock.getsockname(),
            self._rcvbuf,
            self.stats.rcvbuf_granted,
        )
        return sock

    def _run(self) -> None:
        assert self._sock is not None
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                try:
                    if sel.select(self._tick_s):
                        self.poll_once()
                    self._deliver(self._reassembler.flush_expired())
                except Exception:
                    # One bad batch must not end the channel that outlives userspace.
                    log.exception("netconsole receiver loop error")
        finally:
            sel.close()

    def poll_once(self) -> int:
        """Drain what is readable now: one persist_raw batch, then parse; returns its size."""
        batch = self._drain()
        if not batch:
            return 0
        self.stats.batches += 1
        self.stats.datagrams += len(batch)
        try:
            self._persist_raw(batch)
        except Exception:
            # The parsed records still go on: losing the raw copy beats losing the line.
            self.stats.persist_errors += 1
            log.exception("netconsole persist_raw failed for %d datagrams", len(batch))
        out: list[tuple[RawDatagram, NetconsoleRecord]] = []
        for dgram in batch:
            record = parse_datagram(dgram.raw)
            out += self._reassembler.add((dgram.host, dgram.addr[0]), record, dgram)
        self._deliver(out)
        return len(batch)

    def _drain(self) -> list[RawDatagram]:
        assert self._sock is not None
        batch: list[RawDatagram] = []
        hosts: dict[str, str | None] = {}  # resolve each address once per batch
        recv = self._sock.recvfrom
        while len(batch) < self._max_batch:
            try:
                raw, addr = recv(_MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if not self._stopping.is_set():
                    log.warning("netconsole recvfrom failed: %s", exc)
                break
            received_at = self._clock()
            ip = addr[0]
            if ip not in hosts:
                try:
                    hosts[ip] = self._resolve_host(ip)
                except Exception:
                    log.exception("netconsole resolve_host(%s) failed; dropping", ip)
                    hosts[ip] = None
            host = hosts[ip]
            if host is None:
                self.stats.unknown[ip] += 1
                continue
            if raw:
                batch.append(RawDatagram(raw, (ip, addr[1]), received_at, host))
        return batch

    def _deliver(self, emitted: list[tuple[RawDatagram, NetconsoleRecord]]) -> None:
        if not emitted:
            return
        records = [ReceivedRecord(d.host, d.addr, d.received_at, r) for d, r in emitted]
        self.stats.records += len(records)
        try:
            self._on_records(records)
        except Exception:
            self.stats.callback_errors += 1
            log.exception("netconsole on_records failed for %d records", len(records))
