"""Storing classified kernel lines as events, correlated with vLLM, once per kernel record,
each in its occurrence (``occurrences``).

Every channel (the agent's batches, netconsole) calls ``store_kernel_events`` for the lines it
stored or merged; a line that already has its event (the same record brought by the other
channel first) is skipped by the unique ``line_id``, also against a concurrent writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import Integer
from sqlalchemy.orm import Session

from agent.kernel.classify import KernelEvent
from collector import db
from collector.kernel.occurrences import DEFAULT_ESCALATE_AFTER, assign_occurrences, count_stored
from collector.kernel.vllm_context import correlate
from collector.models import KernelEventRow, fits, table_of
from collector.prepared import PerDialect

_TABLE = table_of(KernelEventRow)
# The classifier's fields that are columns, with the length a text column holds.
EVENT_COLUMNS = tuple(f.name for f in fields(KernelEvent) if f.name in _TABLE.c)
_LENGTHS = {
    name: length for name in EVENT_COLUMNS if (length := getattr(_TABLE.c[name].type, "length", 0))
}
# Numbers parsed out of kernel text (Xid codes, pids) that a 32-bit column cannot hold are
# left out of it; the line's text (and the event's ``code``) keep them.
_INT32 = frozenset(n for n in EVENT_COLUMNS if isinstance(_TABLE.c[n].type, Integer))


@dataclass(slots=True)
class NewKernelEvent:
    """A kernel event as stored now, without an ORM instance: an Xid storm stores thousands at
    once, and alerting only reads them. ``correlate`` fills the ``vllm_*`` fields."""

    host_id: int
    boot_pk: int
    line_id: int
    ts: float
    event: KernelEvent
    vllm_phase: str | None = None
    vllm_line_id: int | None = None
    vllm_line_ts: float | None = None
    vllm_line: str | None = None
    occurrence_id: int | None = None
    id: int | None = None

    @property
    def kind(self) -> str:
        return self.event.kind

    def row(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "host_id": self.host_id,
            "boot_pk": self.boot_pk,
            "line_id": self.line_id,
            "ts": self.ts,
            "vllm_phase": self.vllm_phase,
            "vllm_line_id": self.vllm_line_id,
            "vllm_line_ts": self.vllm_line_ts,
            "vllm_line": self.vllm_line,
            "occurrence_id": self.occurrence_id,
        }
        for name in EVENT_COLUMNS:
            value = getattr(self.event, name)
            length = _LENGTHS.get(name)
            if name in _INT32:
                value = fits(value, 32)
            values[name] = value[:length] if length and isinstance(value, str) else value
        return values


_INSERT = PerDialect(
    lambda session: (
        db.insert(session, _TABLE)
        .on_conflict_do_nothing(index_elements=["line_id"])
        .returning(_TABLE.c.id, _TABLE.c.line_id)
    )
)  # built once per dialect: a storm stores events in every batch


def store_kernel_events(
    session: Session,
    *,
    host_id: int,
    boot_pk: int,
    hits: Sequence[tuple[int, float, KernelEvent]],
    escalate_after: int = DEFAULT_ESCALATE_AFTER,
) -> list[NewKernelEvent]:
    """Store (line id, line ts, event) as correlated events in their occurrences; returns the
    ones stored now (a fatal fault back after ``escalate_after`` reboots: inspect_hardware)."""
    if not hits:
        return []
    rows = [
        NewKernelEvent(host_id=host_id, boot_pk=boot_pk, line_id=line_id, ts=ts, event=event)
        for line_id, ts, event in hits
    ]
    correlate(session, host_id=host_id, events=rows)
    groups = assign_occurrences(
        session, host_id=host_id, boot_pk=boot_pk, rows=rows, escalate_after=escalate_after
    )
    # One multi-row statement (an Xid storm is thousands of events) through Core: the ORM's bulk
    # path runs one statement per row here. RETURNING names the rows stored, by line id.
    stmt = _INSERT(session)
    ids = {
        line_id: pk
        for pk, line_id in session.connection().execute(stmt, [r.row() for r in rows]).all()
    }
    count_stored(session, groups, set(ids))
    stored = []
    for row in rows:
        if row.line_id in ids:
            row.id = ids[row.line_id]
            stored.append(row)
    return stored
