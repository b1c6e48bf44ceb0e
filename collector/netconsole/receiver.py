"""UDP netconsole receiver: one thread drains the socket and persists raw batches, another
parses, reassembles and hands records on.

The kernel sends from printk context with no retransmit, so the only loss this side can
prevent is socket-buffer overflow during an oops burst: a big ``SO_RCVBUF``, a receive
thread that does nothing per datagram but copy it into a tuple (parsing is ~5x the cost of
the raw insert, and under one GIL it would throttle the drain), and a parse thread that may
lag. Its backlog is bounded: past ``max_backlog`` datagrams the receive thread keeps only the
ids of persisted batches and the parse thread reads them back with ``load_raw``.
"""

from __future__ import annotations

import logging
import selectors
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from collector.netconsole.parse import NetconsoleRecord, parse_datagram
from collector.netconsole.reassembly import Reassembler
from collector.netconsole.records import (
    IdRange,
    LoadRaw,
    PersistRaw,
    RawDatagram,
    ReceivedRecord,
    ReceiverStats,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 6666
DEFAULT_RCVBUF = 8 * 1024 * 1024
DEFAULT_MAX_BACKLOG = 200_000  # datagrams held in memory for the parse thread (~60 MB)
_MAX_DATAGRAM = 65535
# Every recv and every SQLite step releases the GIL; with the parse thread busy, getting it
# back waits out the interpreter's switch interval (5 ms by default), which capped the drain
# near 20,000 datagrams/s. Process-wide while the receiver runs; restored by stop().
DEFAULT_SWITCH_INTERVAL_S = 0.0005
# Python's socket module lacks the constant; it lifts the rmem_max cap with CAP_NET_ADMIN.
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33 if sys.platform == "linux" else None)


class NetconsoleReceiver:
    """Bind, drain, persist raw, parse, hand records on; ``start()`` / ``stop()``.

    ``persist_raw`` runs on the receive thread and returns the id range it stored (or None);
    ``on_records`` runs on the parse thread. ``switch_interval_s`` lowers the interpreter's
    GIL switch interval while running (None leaves it alone). Without ``load_raw`` an
    overflowing backlog is not parsed (counted in ``stats.unparsed``); the raw copy is stored.
    """

    def __init__(
        self,
        bind: tuple[str, int] = ("0.0.0.0", DEFAULT_PORT),
        *,
        persist_raw: PersistRaw,
        on_records: Callable[[list[ReceivedRecord]], None],
        resolve_host: Callable[[str], str | None],
        load_raw: LoadRaw | None = None,
        rcvbuf: int = DEFAULT_RCVBUF,
        reassembler: Reassembler | None = None,
        clock: Callable[[], float] = time.time,
        max_batch: int = 20_000,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        tick_s: float = 0.25,
        switch_interval_s: float | None = DEFAULT_SWITCH_INTERVAL_S,
    ) -> None:
        self._bind = bind
        self._persist_raw = persist_raw
        self._on_records = on_records
        self._resolve_host = resolve_host
        self._load_raw = load_raw
        self._rcvbuf = rcvbuf
        self._reassembler = reassembler or Reassembler()
        self._clock = clock
        self._max_batch = max_batch
        self._max_backlog = max_backlog
        self._tick_s = tick_s
        self._switch_interval_s = switch_interval_s
        self._saved_switch_s: float | None = None
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._parser: threading.Thread | None = None
        # Parse work: a batch in memory, or (first id, last id, count) to read back.
        self._work: deque[list[RawDatagram] | tuple[int, int, int] | None] = deque()
        self._work_ready = threading.Condition()
        self.stats = ReceiverStats(rcvbuf_requested=rcvbuf)

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); valid after ``start()`` (useful with port 0)."""
        assert self._sock is not None, "start() first"
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Bind and start the threads; bind errors raise here, not in a thread."""
        self._sock = self._open_socket()
        if self._switch_interval_s is not None:
            self._saved_switch_s = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval_s, self._saved_switch_s))
        self._parser = threading.Thread(target=self._parse_loop, name="netconsole-parse")
        self._parser.daemon = True
        self._parser.start()
        self._thread = threading.Thread(target=self._run, name="netconsole-rx", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop receiving, parse the backlog, emit pending fragments as incomplete, close."""
        self._stopping.set()
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout)
        self._push(None)
        if self._parser is not None:
            self._parser.join(timeout)
        self._deliver(self._reassembler.flush_all())
        if self._sock is not None:
            self._sock.close()
        self._wake_r.close()
        self._wake_w.close()
        if self._saved_switch_s is not None:
            sys.setswitchinterval(self._saved_switch_s)
            self._saved_switch_s = None

    def _open_socket(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._bind[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if _SO_RCVBUFFORCE is None:
                raise PermissionError
            sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, self._rcvbuf)
        except OSError:  # no CAP_NET_ADMIN: net.core.rmem_max caps the request
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
                        while self.poll_once() >= self._max_batch:
                            pass  # more is waiting: skip the select
                except Exception:
                    # One bad batch must not end the channel that outlives userspace.
                    log.exception("netconsole receiver loop error")
        finally:
            sel.close()

    def poll_once(self) -> int:
        """Drain what is readable now, persist it as one batch, queue it for parsing."""
        batch = self._drain()
        if not batch:
            return 0
        self.stats.batches += 1
        self.stats.datagrams += len(batch)
        ids: IdRange | None = None
        try:
            ids = self._persist_raw(batch)
        except Exception:
            # The batch is still parsed from memory: losing the raw copy beats losing the line.
            self.stats.persist_errors += 1
            log.exception("netconsole persist_raw failed for %d datagrams", len(batch))
        with self._work_ready:
            if self.stats.backlog < self._max_backlog:
                self._work.append(batch)
            elif ids is not None and self._load_raw is not None:
                # Behind: keep only where the batch is, merged with the previous range.
                last = self._work[-1] if self._work else None
                if isinstance(last, tuple) and last[1] + 1 == ids[0]:
                    self._work[-1] = (last[0], ids[1], last[2] + len(batch))
                else:
                    self._work.append((ids[0], ids[1], len(batch)))
            else:
                self.stats.unparsed += len(batch)
                log.error("netconsole parse backlog full: %d datagrams not parsed", len(batch))
                return len(batch)
            self.stats.backlog += len(batch)
            self._work_ready.notify()
        return len(batch)

    def _drain(self) -> list[RawDatagram]:
        assert self._sock is not None
        batch: list[RawDatagram] = []
        append = batch.append
        hosts: dict[str, str | None] = {}  # resolve each address once per batch
        # recvfrom(65535) would allocate and shrink a 64 KiB object per datagram (2.5x slower).
        buf = bytearray(_MAX_DATAGRAM)
        view = memoryview(buf)
        recv = self._sock.recvfrom_into
        clock = self._clock
        limit = self._max_batch
        while len(batch) < limit:
            try:
                size, addr = recv(buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if not self._stopping.is_set():
                    log.warning("netconsole recvfrom failed: %s", exc)
                break
            ip = addr[0]
            host = hosts.get(ip, "")
            if host == "":
                host = hosts[ip] = self._resolve(ip)
            if host is None:
                self.stats.unknown[ip] += 1
            elif size:
                append(RawDatagram(view[:size].tobytes(), addr[:2], clock(), host))
        return batch

    def _resolve(self, ip: str) -> str | None:
        try:
            return self._resolve_host(ip)
        except Exception:
            log.exception("netconsole resolve_host(%s) failed; dropping", ip)
            return None

    def _push(self, item: list[RawDatagram] | None) -> None:
        with self._work_ready:
            self._work.append(item)
            self._work_ready.notify()

    def _parse_loop(self) -> None:
        while True:
            with self._work_ready:
                if not self._work:
                    self._work_ready.wait(self._tick_s)
                waiting = bool(self._work)
                item = self._work.popleft() if waiting else None
            try:
                if waiting and item is None:
                    return
                if item is not None:
                    self._parse_item(item)
                self._deliver(self._reassembler.flush_expired())
            except Exception:
                log.exception("netconsole parse loop error")

    def _parse_item(self, item: list[RawDatagram] | tuple[int, int, int]) -> None:
        if isinstance(item, list):
            self._parse_batch(item)
            return
        first, last, left = item
        while first <= last and left > 0:
            try:
                rows = self._load_raw(first, last, 5000) if self._load_raw else []
            except Exception:
                log.exception("netconsole load_raw(%d, %d) failed", first, last)
                rows = []
            if not rows:  # pruned or unreadable
                break
            self.stats.reloaded += len(rows)
            self._parse_batch([d for _, d in rows if d is not None], count=False)
            self._unqueue(min(len(rows), left))
            left -= len(rows)
            first = rows[-1][0] + 1
        if left > 0:
            log.error("netconsole: %d datagrams could not be read back for parsing", left)
            self._unqueue(left, unparsed=True)

    def _unqueue(self, n: int, *, unparsed: bool = False) -> None:
        with self._work_ready:
            self.stats.backlog = max(self.stats.backlog - n, 0)
            if unparsed:
                self.stats.unparsed += n

    def _parse_batch(self, batch: list[RawDatagram], *, count: bool = True) -> None:
        out: list[tuple[RawDatagram, NetconsoleRecord]] = []
        add = self._reassembler.add
        for dgram in batch:
            out += add((dgram.host, dgram.addr[0]), parse_datagram(dgram.raw), dgram)
        self._deliver(out)
        if count:
            self._unqueue(len(batch))

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
