"""Records the collector refuses for good, set aside so one bad record never blocks the
stream behind it nor costs its neighbours.

A batch the collector keeps refusing (a 4xx, or a 5xx several times in a row) is posted in
halves until each failing record stands alone (``isolate``); such a record is appended to
``dead-letter.jsonl`` in the state directory (one JSON object a line, bounded) and the
shipper reports a ``dead_lettered`` event.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STORED, DOWN, REJECTED, FAILED = "stored", "down", "rejected", "failed"
STREAMS = ("samples", "lines", "events")
DEAD_LETTER_FILE = "dead-letter.jsonl"
MAX_BYTES = 16 * 2**20  # past this, records are counted in the event but not kept
LEAF_TRIES = 3  # a record refused with a 5xx alone this many times is set aside

Post = Callable[[dict[str, Any]], tuple[str, str]]  # batch → (outcome, the collector's answer)
Refused = tuple[str, dict[str, Any], str]  # (stream, record, why)


def records(batch: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(stream, r) for stream in STREAMS for r in batch.get(stream, ())]


def with_records(batch: dict[str, Any], part: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    out = {**batch, **{stream: [] for stream in STREAMS}}
    for stream, record in part:
        out[stream].append(record)
    return out


def isolate(batch: dict[str, Any], post: Post) -> tuple[str, list[Refused]]:
    """Deliver ``batch`` in ever smaller parts; returns (DOWN if the collector stopped
    answering, else STORED; the records refused alone). Parts delivered before a DOWN are
    stored: resending them is harmless (the collector deduplicates by seq)."""
    pending = [records(batch)]
    refused: list[Refused] = []
    while pending:
        part = pending.pop(0)
        tries = LEAF_TRIES if len(part) == 1 else 1
        for _ in range(tries):
            outcome, why = post(with_records(batch, part))
            if outcome != FAILED:
                break
        if outcome == DOWN:
            return DOWN, refused
        if outcome == STORED:
            continue
        if len(part) == 1:
            refused.append((part[0][0], part[0][1], why))
        else:
            half = len(part) // 2
            pending[:0] = [part[:half], part[half:]]
    return STORED, refused


_MAX_DOUBLINGS = 32  # far past any max_delay / interval


class FailingBatch:
    """The oldest batch while the collector answers it with a 5xx: it waits, backing off
    exponentially, and is split at the ``split_after``-th answer in a row."""

    def __init__(
        self, split_after: int, interval: float, mono: Callable[[], float], max_delay: float = 60
    ) -> None:
        self.split_after = split_after
        self.failures = 0
        self.faults = 0  # those of them that may be a record's fault (see ``failed``)
        self._interval, self._mono, self._max = interval, mono, max_delay
        self._retry_at = 0.0

    def failed(self, *, later: bool = False) -> bool:
        """One more 5xx; True when the batch is to be split now. ``later``: the answer says
        "not now" (503, or a proxy's 502/504: the database or the collector behind it is
        down), nothing about the records; it backs off but never splits, however long it
        lasts, so an outage sets no record aside."""
        self.failures += 1
        self.faults += 0 if later else 1
        # the exponent capped: an outage answered "later" counts on (2 ** 1024 is no float)
        doubled = self._interval * 2 ** min(self.failures - 1, _MAX_DOUBLINGS)
        self._retry_at = self._mono() + min(self._max, doubled)
        return self.faults >= self.split_after

    def waiting(self) -> bool:
        return self.failures > 0 and self._mono() < self._retry_at

    def clear(self) -> None:
        self.failures = self.faults = 0


class DeadLetter:
    """The append-only file of refused records in the state directory."""

    def __init__(self, state_dir: Path, *, wall: Callable[[], float] = time.time) -> None:
        self.path = state_dir / DEAD_LETTER_FILE
        self._wall = wall

    def add(self, boot_id: str, refused: list[Refused]) -> dict[str, Any]:
        """Append ``refused``; returns the ``dead_lettered`` event's data."""
        counts = dict.fromkeys(STREAMS, 0)
        lines = []
        for stream, record, why in refused:
            counts[stream] += 1
            entry = {"at": self._wall(), "boot_id": boot_id, "stream": stream, "why": why[:500]}
            lines.append(json.dumps({**entry, "record": record}, separators=(",", ":")) + "\n")
        kept = False
        try:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size < MAX_BYTES:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write("".join(lines))
                kept = True
        except OSError as exc:
            log.warning("cannot write %s (%s): refused records counted only", self.path, exc)
        log.error("collector refused %s for good: %s", counts, refused[0][2][:300])
        return {**counts, "why": refused[0][2][:300], "file": str(self.path) if kept else None}
