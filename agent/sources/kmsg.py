"""Kernel log from /dev/kmsg (one read() per record) or a file/FIFO of such records, followed."""

from __future__ import annotations

import errno
import logging
import os
import re
import select
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent.sources.base import event

log = logging.getLogger(__name__)

READ_SIZE = 16384  # >= 8 KiB: a smaller buffer gets EINVAL and the kernel skips that record
# /dev/kmsg in a storm: everything the ring buffer holds is read into memory before any of it
# is parsed (a read is a few microseconds, a parse ten times that), then at most PARSE_RUN
# records are parsed and the ring buffer is drained again. So the kernel never waits long for
# the reader, and a storm outrunning the parser piles up here, up to READ_AHEAD records,
# rather than being overwritten in the kernel (which would still be counted, as a gap).
READ_AHEAD = 100_000
PARSE_RUN = 256
FILE_CHUNK = 256 * 1024  # a followed file is read in big chunks and split
EPIPE = None  # in the read-ahead: records were overwritten before this point
_ESCAPE = re.compile(rb"\\x([0-9a-fA-F]{2})")


def monotonic() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _byte(m: re.Match[bytes]) -> bytes:
    # A printed NUL stays ``\\x00``: no log line of ours carries a NUL character.
    return m.group(0) if m.group(1) == b"00" else bytes([int(m.group(1), 16)])


def unescape(raw: bytes) -> str:
    """Undo the kernel's ``\\xNN`` escaping, then decode UTF-8 (invalid bytes replaced);
    ``\\x00`` is kept as written."""
    if b"\\x" not in raw:  # almost every record: no regex pass
        return raw.decode("utf-8", "replace")
    return _ESCAPE.sub(_byte, raw).decode("utf-8", "replace")


def parse_record(
    record: bytes,
    *,
    wall: Callable[[], float] = time.time,
    mono: Callable[[], float] = monotonic,
    offset: float | None = None,
) -> dict[str, Any] | None:
    """One kmsg record (header line + `` KEY=VALUE`` lines) → a wire line dict, None if garbled.

    ``ts`` is the record's monotonic usec shifted by the current wall-minus-monotonic offset
    (``offset`` when the caller read the clocks once for a run of records).
    """
    head, _, rest = record.partition(b"\n")
    header, sep, body = head.partition(b";")
    if not sep:
        return None
    parts = header.split(b",")
    if len(parts) < 4:
        return None
    try:
        prio, kseq, usec = int(parts[0]), int(parts[1]), int(parts[2])
    except ValueError:
        return None
    fields: dict[str, str] = {"_SOURCE_MONOTONIC_TIMESTAMP": str(usec)}
    for extra in parts[4:]:  # unknown header fields are ignored; caller= is worth keeping
        if extra.startswith(b"caller="):
            fields["_CALLER"] = extra[7:].decode("ascii", "replace")
    if rest.strip():
        for cont in rest.split(b"\n"):
            if cont.startswith(b" ") and b"=" in cont:
                key, _, value = cont[1:].partition(b"=")
                fields[unescape(key)] = unescape(value)
    if offset is None:
        offset = wall() - mono()
    return {
        "ts": round(offset + usec / 1e6, 6),
        "source": "kmsg",
        "priority": prio & 7,
        "facility": prio >> 3,
        "kseq": kseq,
        "text": unescape(body),
        "fields": fields,
    }


def split_records(data: bytes) -> tuple[list[bytes], bytes]:
    """Split newline-separated dump text into complete records and an unfinished remainder.

    A record is only complete once the next header line (or the end of available data, see
    ``KmsgSource``) shows that no more continuation lines follow.
    """
    lines = data.split(b"\n")
    partial = lines.pop()  # text after the last newline: a line still being written
    records: list[bytes] = []
    current: list[bytes] = []
    for line in lines:
        if line.startswith(b" ") and current:
            current.append(line)
            continue
        if current:
            records.append(b"\n".join(current))
        current = [line] if line.strip() else []
    return records, b"".join(line + b"\n" for line in current) + partial


class KmsgSource:
    """LineSource over /dev/kmsg (char device) or a regular file / FIFO followed like tail -f."""

    name = "kmsg"

    def __init__(
        self,
        path: Path = Path("/dev/kmsg"),
        *,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = monotonic,
        poll_timeout: float = 0.5,
    ) -> None:
        self.path = path
        self._wall = wall
        self._mono = mono
        self._poll_timeout = poll_timeout  # only bounds how fast ``stop`` is noticed
        self._last_kseq: int | None = None
        self._epipe = False

    def run(self, emit: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        mode = os.stat(self.path).st_mode
        if stat.S_ISCHR(mode):
            runs = self._device_runs(stop)
        elif stat.S_ISFIFO(mode):
            runs = self._dump_records(self._fifo_chunks(stop))
        else:
            runs = self._dump_records(self._file_chunks(stop))
        for run in runs:
            self._emit_run(run, emit)

    def pump(self, emit: Callable[[dict[str, Any]], None]) -> DevicePump | None:
        """/dev/kmsg read on the caller's thread (``DevicePump``); None for a file or FIFO."""
        if not stat.S_ISCHR(os.stat(self.path).st_mode):
            return None
        return DevicePump(self, emit)

    def _emit_run(self, run: list[bytes | None], emit: Callable[[dict[str, Any]], None]) -> None:
        offset = self._wall() - self._mono()  # once per run of records, not per record
        for record in run:
            if record is EPIPE:
                self._epipe = True  # overwritten while we read: next record tells how many
            else:
                self._emit_record(record, emit, offset)

    def _emit_record(
        self, record: bytes, emit: Callable[[dict[str, Any]], None], offset: float
    ) -> None:
        line = parse_record(record, offset=offset)
        if line is None:
            log.debug("kmsg: unparsable record %r", record[:80])
            return
        kseq = line["kseq"]
        last = self._last_kseq
        if last is not None and kseq > last + 1:
            reason = "epipe" if self._epipe else "gap"
            emit(event("kmsg_overrun", lost=kseq - last - 1, reason=reason, after_kseq=last))
        elif self._epipe and last is not None:
            emit(event("kmsg_overrun", lost=0, reason="epipe", after_kseq=last))
        self._epipe = False
        if last is not None and kseq <= last:
            # A lower seq means a different boot's dump or a re-read: order is by kseq per boot.
            log.debug("kmsg: seq went back from %s to %s", last, kseq)
        self._last_kseq = kseq
        emit(line)

    def _device_runs(self, stop: threading.Event) -> Iterator[list[bytes | None]]:
        """Runs of at most PARSE_RUN records (EPIPE marks where the kernel overwrote some),
        the ring buffer drained into the read-ahead before each (see READ_AHEAD)."""
        fd = self._open_device()
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            ahead: deque[bytes | None] = deque()
            while not stop.is_set():
                self._drain(fd, ahead)
                if not ahead:
                    poller.poll(self._poll_timeout * 1000)
                    continue
                yield _take_run(ahead)
        finally:
            os.close(fd)

    def _open_device(self) -> int:
        return os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def _drain(self, fd: int, ahead: deque[bytes | None]) -> None:
        """Read every record the kernel holds now (up to READ_AHEAD queued)."""
        read, append = os.read, ahead.append
        while len(ahead) < READ_AHEAD:
            try:
                record = read(fd, READ_SIZE)
            except BlockingIOError:
                return
            except BrokenPipeError:
                append(EPIPE)
                continue
            except OSError as exc:
                if exc.errno == errno.EINVAL:
                    log.warning("kmsg: record longer than %d bytes lost", READ_SIZE)
                    continue
                raise
            if not record:
                return
            append(record)

    def _dump_records(self, chunks: Iterator[bytes | None]) -> Iterator[list[bytes | None]]:
        """Runs of records from a chunk stream; ``None`` means "no more data right now":
        flush."""
        pending = b""
        for chunk in chunks:
            if chunk is None:
                if pending.strip() and pending.endswith(b"\n"):
                    yield [pending]
                    pending = b""
                continue
            records, pending = split_records(pending + chunk)
            if records:
                yield list(records)
        if pending.strip():
            yield [pending]

    def _file_chunks(self, stop: threading.Event) -> Iterator[bytes | None]:
        from agent.inotify import FILE_MASK, make_waiter  # here: /dev/kmsg needs no ctypes

        # The watch exists before the first read, so a write between read and wait still wakes.
        waiter = make_waiter(str(self.path), poll_interval=0.05, mask=FILE_MASK)
        try:
            with open(self.path, "rb", buffering=0) as f:
                while not stop.is_set():
                    chunk = f.read(FILE_CHUNK)
                    if chunk:
                        yield chunk
                        continue
                    yield None
                    if os.stat(self.path).st_size < f.tell():  # truncated: start over
                        f.seek(0)
                        continue
                    waiter.wait(self._poll_timeout)
        finally:
            waiter.close()

    def _fifo_chunks(self, stop: threading.Event) -> Iterator[bytes | None]:
        # O_RDWR keeps a writer open ourselves, so the FIFO never reports EOF between writers.
        fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            while not stop.is_set():
                try:
                    chunk = os.read(fd, FILE_CHUNK)
                except BlockingIOError:
                    yield None
                    select.select([fd], [], [], self._poll_timeout)
                    continue
                if chunk:
                    yield chunk
        finally:
            os.close(fd)


def _take_run(ahead: deque[bytes | None]) -> list[bytes | None]:
    return [ahead.popleft() for _ in range(min(PARSE_RUN, len(ahead)))]


class DevicePump:
    """/dev/kmsg without a thread of its own: the shipper's thread waits on ``fileno`` with
    everything else it waits on, and calls ``pump`` when it is readable (``agent.outbox``).

    Each call drains the ring buffer into the read-ahead, as the reading thread does, then
    parses and emits one run of records; True while records are left for a next call.
    """

    def __init__(self, source: KmsgSource, emit: Callable[[dict[str, Any]], None]) -> None:
        self._source = source
        self._emit = emit
        self._fd = source._open_device()
        self._ahead: deque[bytes | None] = deque()

    def fileno(self) -> int:
        return self._fd

    def drain(self) -> None:
        """Read what the kernel holds into the read-ahead, parsing nothing."""
        self._source._drain(self._fd, self._ahead)

    def pump(self) -> bool:
        self.drain()
        if self._ahead:
            self._source._emit_run(_take_run(self._ahead), self._emit)
        return bool(self._ahead)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
