"""Disk spool of whole batches, used only while the collector is unreachable.

Format: ``<state-dir>/spool/<n:08d>-<level>.seg`` segment files, replayed in name order, each a
run of frames (``agent.frames``: one batch each, crc-checked). A torn or corrupt frame (``kill
-9`` mid-write, disk garbage) is skipped; a torn tail is truncated away on open.

Bound and drop priority: the spool holds at most ``max_bytes``, and never more than the disk
lets it. A write that fails (ENOSPC, EDQUOT, any OSError) is undone (the segment is cut back to
its last whole frame) and the spool learns that the disk holds what it holds now; the free space
is measured again each time that learned bound is in the way, and before each new segment (it
stops ``RESERVE`` short of a full disk). Room is made the same way at either bound: oldest
segments first, every other sample dropped (level 1), then samples and events (level 2), and
only then whole oldest segments, kernel and log lines last. The segment being appended to is
left alone until it is full (at most an eighth of the bound), so appending at the bound never
rotates a segment per batch. Every drop is counted (``take_dropped``, with its reasons).

A thinned segment is rewritten through a temp copy when the disk has room for the copy, else
compacted in place: frames only move towards the start, each in one write, so a ``kill -9``
mid-way leaves whole frames (at worst some twice, which the collector drops as repeats).

fsync policy: every append is written straight to the kernel (survives ``kill -9``); fsync at
most once a second and on close (a power loss may cost the last second).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent import diskio
from agent.frames import (
    DROP_KEYS,
    HEADER,
    coalesce,
    count,
    count_all,
    encode_frame,
    iter_frames,
    load,
    max_kseqs,
    thin,
)

log = logging.getLogger(__name__)

MIN_SEGMENT = 16 * 1024
MAX_SEGMENT = 4 * 1024 * 1024
RESERVE = 64 * 1024  # left free on the disk for the state file and everyone else


class _Segment:
    __slots__ = ("level", "number", "size")

    def __init__(self, number: int, level: int, size: int) -> None:
        self.number, self.level, self.size = number, level, size

    @property
    def name(self) -> str:
        return f"{self.number:08d}-{self.level}.seg"


class Spool:
    """Bounded FIFO of batches on disk; ``take``/``pop`` replay them oldest first."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        room: Callable[[Path], int] = diskio.free_bytes,
    ) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.disk_bound: int | None = None  # what the disk holds, once a write failed
        self._clock = clock
        self._room = room
        self._segments: list[_Segment] = []
        self._active: tuple[_Segment, int] | None = None  # segment being appended, its fd
        self._reading: list[bytes] | None = None  # remaining payloads of the oldest segment
        self._consumed = 0  # bytes of the oldest segment already popped
        self._last_fsync = 0.0
        self.dropped = dict.fromkeys(DROP_KEYS, 0)
        self.reasons: set[str] = set()
        self.max_kseq: dict[str, int] = {}  # boot_id -> highest kseq held on open (resume hint)
        try:
            self._open()
        except OSError as exc:  # unreadable spool dir: start empty, keep running
            log.warning("spool: cannot open %s (%s): starting without its contents", directory, exc)

    # -- opening and inspecting ------------------------------------------------------------

    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.tmp"):  # a rewrite cut short: its source is still there
            stale.unlink()
        for path in sorted(self.dir.glob("*.seg")):
            try:
                number, level = (int(x) for x in path.stem.split("-"))
            except ValueError:
                log.warning("spool: ignoring stray file %s", path)
                continue
            data = path.read_bytes()
            good_end = 0
            for _, end, payload in iter_frames(data):
                good_end = end
                for boot, kseq in max_kseqs(load(payload)).items():
                    self.max_kseq[boot] = max(self.max_kseq.get(boot, -1), kseq)
            if good_end < len(data):
                log.warning("spool: %s: skipping %d corrupt/torn bytes", path, len(data) - good_end)
                with open(path, "r+b") as f:  # truncate a torn tail so appends stay framed
                    f.truncate(good_end)
            if good_end == 0:
                path.unlink()
                continue
            self._segments.append(_Segment(number, level, good_end))

    def __bool__(self) -> bool:
        return bool(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def backlog_bytes(self) -> int:
        """Bytes still to replay (what was popped from the oldest segment not counted)."""
        return max(0, self.size - self._consumed)

    @property
    def bound(self) -> int:
        if self.disk_bound is None:
            return self.max_bytes
        return min(self.max_bytes, self.disk_bound)

    @property
    def segment_bytes(self) -> int:
        return min(MAX_SEGMENT, max(MIN_SEGMENT, self.bound // 8))

    def take_dropped(self) -> tuple[dict[str, int], list[str]] | None:
        """(counts, reasons) dropped since the last call, None if nothing was."""
        if not any(self.dropped.values()):
            return None
        counts, self.dropped = self.dropped, dict.fromkeys(DROP_KEYS, 0)
        reasons, self.reasons = sorted(self.reasons), set()
        return counts, reasons

    def _drop(self, counts: dict[str, int]) -> None:
        for key in DROP_KEYS:
            self.dropped[key] += counts.get(key, 0)
        if any(counts.values()):
            self.reasons.add("disk_full" if self.bound < self.max_bytes else "spool_full")

    # -- writing ---------------------------------------------------------------------------

    def append(self, batch: dict[str, Any]) -> bool:
        """Spool ``batch``; False when it had to be dropped (counted) for lack of room."""
        frame = encode_frame(batch)
        for _ in range(2):  # a failed write teaches the bound; room is made, then one retry
            if self.size + len(frame) > self.bound:
                self._make_room(len(frame))
            if self.size + len(frame) > self.bound:
                break
            try:
                self._write(frame)
                return True
            except OSError as exc:
                if self.disk_bound is None:
                    log.warning("spool: write failed (%s): the disk is the bound now", exc)
                self.disk_bound = self.size
        self._drop(count(batch))
        return False

    def _write(self, frame: bytes) -> None:
        if self._active is None or self._active[0].size >= self.segment_bytes:
            self._rotate()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._check_disk()
            number = self._segments[-1].number + 1 if self._segments else 1
            seg = _Segment(number, 0, 0)
            fd = os.open(self.dir / seg.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._segments.append(seg)
            self._active = (seg, fd)
        seg, fd = self._active
        try:
            if os.write(fd, frame) != len(frame):
                raise OSError(28, "short write")  # ENOSPC
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, seg.size)  # cut back to whole frames
            raise
        seg.size += len(frame)
        if self._clock() - self._last_fsync >= 1.0:
            os.fsync(fd)
            self._last_fsync = self._clock()

    def _check_disk(self) -> None:
        """Learn (or forget) the disk's bound from its free space."""
        try:
            room = self._room(self.dir) - RESERVE
        except OSError:
            return
        fits = room >= self.max_bytes - self.size
        self.disk_bound = None if fits else self.size + max(0, room)

    def _rotate(self) -> None:
        if self._active is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._active[1])
            os.close(self._active[1])
            self._active = None

    def close(self) -> None:
        self._rotate()

    def _make_room(self, need: int) -> None:
        """Thin samples, then drop samples/events, then (only then) whole oldest segments."""
        if self.disk_bound is not None:
            self._check_disk()
        active = self._active[0] if self._active is not None else None
        for level in (1, 2, 3):
            for seg in list(self._segments):
                if self.size + need <= self.bound:
                    return
                if level == 3:
                    if seg is active:
                        self._rotate()
                    self._drop(count_all(self._payloads(seg)))
                    self._remove(seg)
                elif seg.level < level and seg is not active:
                    self._thin(seg, level)

    def _payloads(self, seg: _Segment) -> list[bytes]:
        if self._reading is not None and self._segments and seg is self._segments[0]:
            return self._reading
        try:
            return [p for _, _, p in iter_frames((self.dir / seg.name).read_bytes())]
        except OSError:
            return []

    def _remove(self, seg: _Segment) -> None:
        if self._segments and seg is self._segments[0]:
            self._reading = None
            self._consumed = 0
        self._segments.remove(seg)
        with contextlib.suppress(OSError):
            (self.dir / seg.name).unlink()

    def _thin(self, seg: _Segment, level: int) -> None:
        frames, lost = thin(self._payloads(seg), level)
        old_path, old_level = self.dir / seg.name, seg.level
        seg.level = level
        try:
            room = self._room(self.dir) - RESERVE
        except OSError:
            room = 0
        try:
            diskio.replace(old_path, self.dir / seg.name, frames, room=room)
        except OSError as exc:
            seg.level = old_level
            log.warning("spool: cannot thin %s (%s)", old_path.name, exc)
            return
        self._drop(lost)
        seg.size = sum(len(f) for f in frames)
        if self._reading is not None and seg is self._segments[0]:
            self._reading = [f[HEADER.size :] for f in frames]
            self._consumed = 0

    # -- replay ----------------------------------------------------------------------------

    def _head(self) -> list[bytes]:
        """The remaining payloads of the oldest segment (closed first if still appended)."""
        if self._reading is None:
            if self._active is not None and self._active[0] is self._segments[0]:
                self._rotate()  # never read a segment that is still being appended
            self._reading = self._payloads(self._segments[0])
        return self._reading

    def take(self, max_records: int, max_bytes: int) -> tuple[dict[str, Any], int, int] | None:
        """The oldest spooled batches of one boot merged into one, within the limits (still
        in the spool until ``pop(n)``), with how many frames and bytes it holds; None when
        empty."""
        while self._segments and not self._head():
            self._remove(self._segments[0])
        merged, frames, size = coalesce(self._oldest_first(), max_records, max_bytes)
        if merged is None:
            self.pop(frames)
            return None
        return merged, frames, size

    def _oldest_first(self) -> Iterator[bytes]:
        for index, seg in enumerate(list(self._segments)):
            if self._active is not None and self._active[0] is seg:
                self._rotate()
            yield from self._head() if index == 0 else self._payloads(seg)

    def peek(self) -> dict[str, Any] | None:
        """The oldest spooled batch on its own (still in the spool until ``pop``)."""
        found = self.take(1, 1)
        return found[0] if found else None

    def pop(self, frames: int = 1) -> None:
        """Forget the ``frames`` oldest frames (the collector has them or refused them)."""
        while frames > 0 and self._segments:
            reading = self._head()
            k = min(frames, len(reading))
            self._consumed += sum(HEADER.size + len(p) for p in reading[:k])
            del reading[:k]
            frames -= k
            if not reading:
                self._remove(self._segments[0])
