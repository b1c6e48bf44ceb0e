"""Reassemble ``ncfrag`` fragments into whole records; time out missing pieces, never drop."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from collector.netconsole.parse import NetconsoleRecord, parse_body

# Placed where bytes never arrived, so a reader sees the hole rather than glued text.
GAP_MARKER = "[netconsole: {n} bytes missing]"


@dataclass
class _Pending:
    header: NetconsoleRecord
    context: Any  # the caller's note on the first fragment (e.g. its arrival)
    total: int
    first_seen: float
    chunks: dict[int, bytes] = field(default_factory=dict)

    def covered(self) -> int:
        """Bytes of [0, total) covered by the chunks so far (overlaps counted once)."""
        end = done = 0
        for off in sorted(self.chunks):
            stop = min(off + len(self.chunks[off]), self.total)
            if stop > max(off, end):
                done += stop - max(off, end)
                end = stop
        return done

    def assemble(self) -> tuple[bytes, int]:
        """Body in offset order, a marker in each hole; returns (body, missing byte count)."""
        parts: list[bytes] = []
        end = missing = 0
        for off in sorted(self.chunks):
            chunk = self.chunks[off][: max(self.total - off, 0)]
            if off > end:
                missing += off - end
                parts.append(GAP_MARKER.format(n=off - end).encode())
                end = off
            if off + len(chunk) > end:
                parts.append(chunk[end - off :])
                end = off + len(chunk)
        if end < self.total:
            missing += self.total - end
            parts.append(GAP_MARKER.format(n=self.total - end).encode())
        return b"".join(parts), missing


Emitted = tuple[Any, NetconsoleRecord]  # (context of the first datagram, record)


class Reassembler:
    """Collect fragments keyed by (source, kseq); emit each record exactly once.

    Every method returns ``(context, record)`` pairs, ``context`` being what the caller
    passed with the record's first datagram (the receiver passes the raw datagram).
    """

    def __init__(
        self,
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        max_pending: int = 4096,
    ) -> None:
        self.timeout_s = timeout_s
        self._clock = clock
        self._max_pending = max_pending
        self._pending: dict[tuple[Hashable, int], _Pending] = {}
        self.incomplete = 0  # records emitted with missing bytes

    def add(self, source: Hashable, record: NetconsoleRecord, context: Any = None) -> list[Emitted]:
        """Feed one parsed datagram; returns what it completes (plus any forced eviction)."""
        if record.fragment is None or record.kseq is None:
            return [(context, record)]
        off, total = record.fragment
        key = (source, record.kseq)
        pending = self._pending.get(key)
        out: list[Emitted] = []
        if pending is None:
            if len(self._pending) >= self._max_pending:
                oldest = min(self._pending, key=lambda k: self._pending[k].first_seen)
                out.append(self._emit(self._pending.pop(oldest)))
            pending = _Pending(record, context, total, first_seen=self._clock())
            self._pending[key] = pending
        pending.chunks.setdefault(off, record.body)
        if pending.covered() >= pending.total:
            out.append(self._emit(self._pending.pop(key)))
        return out

    def flush_expired(self, now: float | None = None) -> list[Emitted]:
        """Emit, flagged incomplete, every record whose first fragment is older than timeout."""
        now = self._clock() if now is None else now
        expired = [k for k, p in self._pending.items() if now - p.first_seen >= self.timeout_s]
        return [self._emit(self._pending.pop(k)) for k in expired]

    def flush_all(self) -> list[Emitted]:
        """Emit everything still pending (on shutdown)."""
        keys = list(self._pending)
        return [self._emit(self._pending.pop(k)) for k in keys]

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _emit(self, pending: _Pending) -> Emitted:
        body, missing = pending.assemble()
        record = parse_body(pending.header, body)
        if missing:
            self.incomplete += 1
            record = replace(record, incomplete=True, missing_bytes=missing)
        return pending.context, record
