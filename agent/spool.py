"""Disk spool of whole batches, used only while the collector is unreachable.

Format: ``<state-dir>/spool/<n:08d>-<level>.seg`` segment files, replayed in name order. Each
record is a frame ``b"FWS1" | u32 length | u32 crc32(payload) | payload`` (big endian), payload
= the batch as compact JSON. A torn or corrupt frame (``kill -9`` mid-write, disk garbage) is
skipped by searching for the next valid frame; a torn tail is truncated away on open.
``level`` says how far a segment was thinned (0 intact, 1 every other sample dropped, 2 samples
and events dropped). fsync policy: every append is written straight to the kernel (survives
``kill -9``); fsync at most once a second and on close (a power loss may cost the last second).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAGIC = b"FWS1"
_HEADER = struct.Struct(">4sII")
MIN_SEGMENT = 64 * 1024
MAX_SEGMENT = 4 * 1024 * 1024
DROP_KEYS = ("samples", "lines", "events")


def encode_frame(batch: dict[str, Any]) -> bytes:
    payload = json.dumps(batch, separators=(",", ":")).encode()
    return _HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def iter_frames(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, payload) of every valid frame; garbage between frames is skipped."""
    pos = 0
    while pos < len(data):
        if data.startswith(MAGIC, pos) and pos + _HEADER.size <= len(data):
            _, length, crc = _HEADER.unpack_from(data, pos)
            end = pos + _HEADER.size + length
            payload = data[pos + _HEADER.size : end]
            if end <= len(data) and zlib.crc32(payload) == crc:
                yield pos, end, payload
                pos = end
                continue
        nxt = data.find(MAGIC, pos + 1)
        if nxt < 0:
            return
        pos = nxt


@dataclass
class _Segment:
    number: int
    level: int
    size: int

    @property
    def name(self) -> str:
        return f"{self.number:08d}-{self.level}.seg"


class Spool:
    """Bounded FIFO of batches on disk; ``peek``/``pop`` replay them oldest first."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.segment_bytes = min(MAX_SEGMENT, max(MIN_SEGMENT, max_bytes // 8))
        self._clock = clock
        self._segments: list[_Segment] = []
        self._active: tuple[_Segment, int] | None = None  # segment being appended, its fd
        self._reading: list[bytes] | None = None  # remaining payloads of the oldest segment
        self._last_fsync = 0.0
        self.dropped = dict.fromkeys(DROP_KEYS, 0)
        self.max_kseq: dict[str, int] = {}  # boot_id -> highest kseq held on open (resume hint)
        self._open()

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
                self._note_kseq(payload)
            if good_end < len(data):
                log.warning("spool: %s: skipping %d corrupt/torn bytes", path, len(data) - good_end)
                with open(path, "r+b") as f:  # truncate a torn tail so appends stay framed
                    f.truncate(good_end)
            if good_end == 0:
                path.unlink()
                continue
            self._segments.append(_Segment(number, level, good_end))

    def _note_kseq(self, payload: bytes) -> None:
        try:
            batch = json.loads(payload)
            kseqs = [ln["kseq"] for ln in batch.get("lines", ()) if ln.get("kseq") is not None]
        except (ValueError, TypeError, KeyError, AttributeError):
            return
        if kseqs:
            boot = batch.get("boot_id", "")
            self.max_kseq[boot] = max(self.max_kseq.get(boot, -1), *kseqs)

    def __bool__(self) -> bool:
        return bool(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def take_dropped(self) -> dict[str, int] | None:
        """Counts dropped since the last call (for a ``spool_dropped`` event), None if none."""
        if not any(self.dropped.values()):
            return None
        counts, self.dropped = self.dropped, dict.fromkeys(DROP_KEYS, 0)
        return counts

    # -- writing ---------------------------------------------------------------------------

    def append(self, batch: dict[str, Any]) -> None:
        frame = encode_frame(batch)
        if self.size + len(frame) > self.max_bytes:
            self._make_room(len(frame))
        if self._active is None or self._active[0].size >= self.segment_bytes:
            self._rotate()
            number = self._segments[-1].number + 1 if self._segments else 1
            seg = _Segment(number, 0, 0)
            fd = os.open(self.dir / seg.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._segments.append(seg)
            self._active = (seg, fd)
        seg, fd = self._active
        os.write(fd, frame)
        seg.size += len(frame)
        if self._clock() - self._last_fsync >= 1.0:
            os.fsync(fd)
            self._last_fsync = self._clock()

    def _rotate(self) -> None:
        if self._active is not None:
            os.fsync(self._active[1])
            os.close(self._active[1])
            self._active = None

    def close(self) -> None:
        self._rotate()

    def _make_room(self, need: int) -> None:
        """Thin samples, then drop samples/events, then (only then) whole oldest segments."""
        self._rotate()
        for level in (1, 2, 3):
            for seg in list(self._segments):
                if self.size + need <= self.max_bytes:
                    return
                if level == 3:
                    self._drop_segment(seg)
                elif seg.level < level:
                    self._rewrite(seg, level)
        if self.size + need > self.max_bytes:
            log.warning("spool: one batch of %d bytes exceeds the spool bound", need)

    def _payloads(self, seg: _Segment) -> list[bytes]:
        if self._reading is not None and self._segments and seg is self._segments[0]:
            return self._reading
        return [p for _, _, p in iter_frames((self.dir / seg.name).read_bytes())]

    def _drop_segment(self, seg: _Segment) -> None:
        for payload in self._payloads(seg):
            batch = json.loads(payload)
            for key in DROP_KEYS:
                self.dropped[key] += len(batch.get(key, ()))
        self._remove(seg)

    def _remove(self, seg: _Segment) -> None:
        if self._segments and seg is self._segments[0]:
            self._reading = None
        self._segments.remove(seg)
        (self.dir / seg.name).unlink(missing_ok=True)

    def _rewrite(self, seg: _Segment, level: int) -> None:
        old_path = self.dir / seg.name
        keep_sample = True
        frames: list[bytes] = []
        for payload in self._payloads(seg):
            batch = json.loads(payload)
            samples = batch.get("samples", [])
            if level == 1:
                kept = []
                for sample in samples:
                    if keep_sample:
                        kept.append(sample)
                    keep_sample = not keep_sample
            else:
                kept = []
                self.dropped["events"] += len(batch.get("events", ()))
                batch["events"] = []
            self.dropped["samples"] += len(samples) - len(kept)
            batch["samples"] = kept
            if batch["samples"] or batch.get("lines") or batch.get("events"):
                frames.append(encode_frame(batch))
        seg.level = level
        new_path = self.dir / seg.name
        tmp = new_path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(frames))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, new_path)
        if old_path != new_path:
            old_path.unlink(missing_ok=True)
        seg.size = sum(len(f) for f in frames)
        if self._reading is not None and seg is self._segments[0]:
            self._reading = [p for _, _, p in iter_frames(b"".join(frames))]

    # -- replay ----------------------------------------------------------------------------

    def peek(self) -> dict[str, Any] | None:
        """The oldest spooled batch (still in the spool until ``pop``), None when empty."""
        while self._segments:
            if self._reading is None:
                if self._active is not None and self._active[0] is self._segments[0]:
                    self._rotate()  # never read a segment that is still being appended
                self._reading = self._payloads(self._segments[0])
            if self._reading:
                try:
                    return json.loads(self._reading[0])
                except ValueError:  # crc-valid but not JSON: nothing to replay
                    self._reading.pop(0)
                    continue
            self._remove(self._segments[0])
        return None

    def pop(self) -> None:
        """Forget the batch ``peek`` returned (the collector has it or refused it for good)."""
        if self._reading:
            self._reading.pop(0)
            if not self._reading:
                self._remove(self._segments[0])
