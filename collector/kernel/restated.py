"""Live kernel lines that restate a report already counted: no second event, count or alert.

Ingest and netconsole classify each kernel record on its own, in batches cut anywhere, but the
driver prints some faults over several records: an Xid 79 and, right after it, "GPU <address>:
GPU has fallen off the bus."; an NVSwitch SXid's verdict and the dump of its error entry
("Severity N Engine instance ...", "Data {...}"); and the kernel an arm64 SError line and,
after the registers, "Kernel panic - not syncing: Asynchronous SError Interrupt", and an oops's
head line ("BUG: kernel NULL pointer dereference, ...": the event, stored and alerted at once)
and, a few records later, its die line ("Oops: 0000 [#1] ..."). The records around a new line
that may restate a report are read as a saved log is (``reports.Reports``, as ``inspect`` and
the post-mortem read them), so the live path counts each report once, whatever the batches: a
restating line stays a stored line, never an event, an occurrence count or an alert.

Records with their kmsg seq (the agent's /dev/kmsg lines, netconsole's extended records) are
read with their boot's stored records ``CONTEXT`` seqs around them: a report split across
batches, or channels, is read whole. Records without one (the journal's catch-up, plain
netconsole lines) are read with the other such records of the same call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import classify_kernel_line
from agent.kernel.event import KernelEvent
from agent.kernel.generic import restates_serror
from agent.kernel.oops_head import is_die_line
from collector.kernel.reports import (
    OOPS_HEAD_RECORDS,
    SERROR_RECORDS,
    SXID_DUMP,
    SXID_GAP,
    LogEvent,
    Reports,
    Stamp,
)
from collector.models import Line

# Seqs before the first new record that a report's earlier lines may lie in (an SError line
# furthest, then an oops's head line), and after the last that a verdict may lie in, which
# gives a dump whose verdict came first no more.
CONTEXT = max(SXID_GAP, SERROR_RECORDS, OOPS_HEAD_RECORDS) + 1

Hit = tuple[int, float, KernelEvent]  # (line id, line ts, event): what ``store`` takes


@dataclass(frozen=True)
class NewRecord:
    """A classified kernel record just stored: its row, kmsg seq, kernel usec and text."""

    line_id: int
    ts: float
    kseq: int | None
    usec: int | None
    text: str
    event: KernelEvent

    @property
    def hit(self) -> Hit:
        return self.line_id, self.ts, self.event


def kernel_usec(fields: Mapping[str, Any] | None) -> int | None:
    """The kernel's monotonic usec of a stored or wire record, whichever channel wrote it."""
    if not fields:
        return None
    value = fields.get("_SOURCE_MONOTONIC_TIMESTAMP", fields.get("usec"))
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def may_restate(event: KernelEvent) -> bool:
    """A fall line, an SXid dump line, an SError panic or an oops's die line: what ``Reports``
    may find restating a report."""
    if event.kind == "bus_off" or restates_serror(event):
        return True
    if is_die_line(event.kind, event.code, event.detail):
        return True
    return event.kind == "sxid" and (event.detail or "").startswith(SXID_DUMP)


def fold_restatements(session: Session, *, boot_pk: int, records: Sequence[NewRecord]) -> list[Hit]:
    """The records of one boot as events to store, less those restating a report counted
    before them (a dump whose verdict came only after it gets that verdict)."""
    if not any(may_restate(r.event) for r in records):
        return [r.hit for r in records]
    keyed = [r for r in records if r.kseq is not None]
    unkeyed = [r for r in records if r.kseq is None]
    read: dict[int, KernelEvent | None] = {}
    if any(may_restate(r.event) for r in keyed):
        read.update(_read_keyed(session, boot_pk, keyed))
    if any(may_restate(r.event) for r in unkeyed):
        window = [StoredRecord(r.line_id, r.ts, r.usec, r.text) for r in unkeyed]
        read.update(_read(window, range(len(window)), {r.line_id: r.event for r in unkeyed}))
    out = []
    for r in records:
        event = read.get(r.line_id, r.event)
        if event is not None:
            out.append((r.line_id, r.ts, event))
    return out


class StoredRecord(NamedTuple):
    """A record of the window read: its row, kernel usec and text."""

    line_id: int
    ts: float
    usec: int | None
    text: str


def _read_keyed(
    session: Session, boot_pk: int, records: Sequence[NewRecord]
) -> dict[int, KernelEvent | None]:
    """The new records as their boot's records around them read them, by kmsg seq."""
    seqs = [int(r.kseq) for r in records if r.kseq is not None and may_restate(r.event)]
    rows = session.execute(
        select(Line.id, Line.kseq, Line.ts, Line.fields, Line.text)
        .where(
            Line.boot_pk == boot_pk,
            Line.kseq.between(min(seqs) - CONTEXT, max(seqs) + CONTEXT),
        )
        .order_by(Line.kseq)
    ).all()
    window = [
        StoredRecord(line_id, ts, kernel_usec(fields), text)
        for line_id, _, ts, fields, text in rows
    ]
    places = [int(kseq) for _, kseq, _, _, _ in rows]
    return _read(window, places, {r.line_id: r.event for r in records})


def counted_events(window: Sequence[StoredRecord]) -> list[KernelEvent]:
    """The events of stored records (in kernel order), each report counted once: what the
    live path stored for them (a matrix run's kernel counts)."""
    return [found.event for found in _reports(window, range(len(window)), {}).events]


def _read(
    window: Sequence[StoredRecord], places: Sequence[int], new: Mapping[int, KernelEvent]
) -> dict[int, KernelEvent | None]:
    """The event of each new record of ``window`` (records in kernel order, at ``places``) as
    the reading of the whole window gives it: None where it restates a report before it."""
    reports = _reports(window, places, new)
    counted = {found.line_no: found.event for found in reports.events}
    return {row.line_id: counted.get(i + 1) for i, row in enumerate(window) if row.line_id in new}


def _reports(
    window: Sequence[StoredRecord], places: Sequence[int], new: Mapping[int, KernelEvent]
) -> Reports:
    """``window`` read as a saved log is; ``new``: the events of its new records, by line id."""
    usecs = [r.usec for r in window]
    if all(u is not None for u in usecs):
        stamps: list[Stamp | None] = [("monotonic", int(u or 0) / 1e6) for u in usecs]
    else:  # one clock for all: the rows' own
        stamps = [("wall", r.ts) for r in window]
    reports = Reports([r.text for r in window], stamps)
    for i, (row, place) in enumerate(zip(window, places, strict=True)):
        event = new[row.line_id] if row.line_id in new else classify_kernel_line(row.text)
        if event is not None:
            reports.add(place, LogEvent(i + 1, row.text, event))
    return reports
