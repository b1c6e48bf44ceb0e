"""Pruning: each kind older than its host's retention, deleted in short transactions.

Every batch is its own transaction of at most ``retention_batch_rows`` rows, so the write lock
(SQLite's one writer, PostgreSQL's row locks) is held for milliseconds and ingest runs between
batches; a run stops after ``retention_max_batches`` and the next run carries on. What must stay
stays: urgent kernel lines outlive the other lines, a line that a kernel event points at lives
as long as the event, incidents are pruned only once resolved (their snapshot and artifacts go
with them), and matrix runs are never pruned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Delete, and_, delete, exists, not_, select
from sqlalchemy.orm import Session, sessionmaker

from collector import db
from collector.models import (
    KERNEL_KEEP_PRIORITY,
    KERNEL_SOURCES,
    AgentEvent,
    Host,
    HostEvent,
    Incident,
    IncidentState,
    KernelEventRow,
    Line,
    Sample,
    sample_rollups,
)
from collector.retention.policy import cutoffs, host_policy
from collector.settings import Settings
from collector.timeutil import from_epoch

log = logging.getLogger(__name__)

# (session, host_id, before, rows) -> rows deleted by one batch
Pruner = Callable[[Session, int, float, int], int]
TimeSeries = type[Line] | type[AgentEvent] | type[HostEvent] | type[KernelEventRow]


def urgent_kernel_line() -> ColumnElement[bool]:
    """A kernel record at err or worse: kept ``kernel_lines`` days, not ``lines`` days."""
    return and_(
        Line.source.in_(KERNEL_SOURCES),
        Line.priority.is_not(None),
        Line.priority <= KERNEL_KEEP_PRIORITY,
    )


def _deleted(session: Session, statement: Delete) -> int:
    result = cast(CursorResult[Any], session.execute(statement))
    return max(result.rowcount, 0)


def _by_id(model: TimeSeries, *where: ColumnElement[bool]) -> Pruner:
    """A table with an id and (host_id, ts) indexed: the oldest ``rows`` ids of one host."""

    def prune(session: Session, host_id: int, before: float, rows: int) -> int:
        ids = select(model.id).where(model.host_id == host_id, model.ts < before, *where)
        return _deleted(session, delete(model).where(model.id.in_(ids.limit(rows))))

    return prune


def _samples(session: Session, host_id: int, before: float, rows: int) -> int:
    """Samples have no id: the oldest ``rows`` of one host by time, deleted as one range of
    its (host_id, ts) index (a few more where several share the last stamp)."""
    host_old = and_(Sample.host_id == host_id, Sample.ts < before)
    last = session.scalar(
        select(Sample.ts).where(host_old).order_by(Sample.ts).offset(rows - 1).limit(1)
    )
    upto = host_old if last is None else and_(host_old, Sample.ts <= last)
    return _deleted(session, delete(Sample).where(upto))


def _rollups(session: Session, host_id: int, before: float, rows: int) -> int:
    """Rollups have no id: the oldest ``rows`` buckets, deleted as one range."""
    table = sample_rollups
    buckets = (
        select(table.c.bucket)
        .where(table.c.host_id == host_id, table.c.bucket < before)
        .order_by(table.c.bucket)
        .limit(rows)
        .subquery()
    )
    last = session.scalar(select(buckets.c.bucket).order_by(buckets.c.bucket.desc()).limit(1))
    if last is None:
        return 0
    return _deleted(
        session, delete(table).where(table.c.host_id == host_id, table.c.bucket <= last)
    )


def _incidents(session: Session, host_id: int, before: float, rows: int) -> int:
    """Resolved incidents; the database cascades to their snapshot and artifacts."""
    ids = select(Incident.id).where(
        Incident.host_id == host_id,
        Incident.state == IncidentState.RESOLVED,
        Incident.resolved_at < from_epoch(before),
    )
    return _deleted(session, delete(Incident).where(Incident.id.in_(ids.limit(rows))))


_NO_EVENT = not_(exists().where(KernelEventRow.line_id == Line.id))

# Kind -> its tables' pruners, in an order that never orphans: kernel events before the lines
# they point at.
PRUNERS: dict[str, tuple[Pruner, ...]] = {
    "samples": (_samples,),
    "rollups": (_rollups,),
    "kernel_events": (_by_id(KernelEventRow),),
    "lines": (_by_id(Line, not_(urgent_kernel_line()), _NO_EVENT),),
    "kernel_lines": (_by_id(Line, urgent_kernel_line(), _NO_EVENT),),
    "events": (_by_id(AgentEvent), _by_id(HostEvent)),
    "incidents": (_incidents,),
}

# The tables each kind's pruning frees rows in (what PostgreSQL vacuums after a run).
TABLES = {
    "samples": ("samples",),
    "rollups": ("sample_rollups",),
    "kernel_events": ("kernel_events",),
    "lines": ("lines",),
    "kernel_lines": ("lines",),
    "events": ("agent_events", "host_events"),
    "incidents": ("incidents", "incident_snapshots", "artifacts"),
}


@dataclass
class PruneRun:
    """What one run deleted, per kind, in how many batches, and whether it stopped with work
    left."""

    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    more: bool = False


def prune(
    factory: sessionmaker[Session], *, now: float, settings: Settings, reclaim: bool = True
) -> PruneRun:
    """Delete what every host's retention no longer keeps (the scheduler's ``retention`` job)."""
    with db.read_scope(factory) as session:
        hosts = [(h.id, h.name, h.retention) for h in session.scalars(select(Host))]
    run = PruneRun()
    for host_id, name, overrides in hosts:
        before = cutoffs(host_policy(settings, overrides), now=now)
        for kind, pruners in PRUNERS.items():
            cut = before[kind]
            if cut is None:
                continue
            for pruner in pruners:
                gone = _drain(
                    factory, pruner, host_id=host_id, before=cut, settings=settings, run=run
                )
                if gone:
                    run.deleted[kind] = run.deleted.get(kind, 0) + gone
                    log.info("retention: host %s: %d %s pruned", name, gone, kind)
    if reclaim and run.deleted:
        db.reclaim_space(factory, tables=sorted({t for k in run.deleted for t in TABLES[k]}))
    return run


def _drain(
    factory: sessionmaker[Session],
    pruner: Pruner,
    *,
    host_id: int,
    before: float,
    settings: Settings,
    run: PruneRun,
) -> int:
    """Batches until one comes back short or the run's budget is spent."""
    rows, gone = settings.retention_batch_rows, 0
    while True:
        if run.batches >= settings.retention_max_batches:
            run.more = True
            return gone
        with db.session_scope(factory) as session:
            n = pruner(session, host_id, before, rows)
        run.batches += n > 0  # a batch that found nothing (an index probe) is free
        gone += n
        if n < rows:
            return gone
