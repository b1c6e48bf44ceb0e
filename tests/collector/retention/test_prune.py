"""Retention on SQLite and PostgreSQL: what is older than its kind's days goes, in batches, and
what must stay stays (urgent kernel lines, the lines kernel events point at, incidents with their
evidence, matrix runs, a host's own longer retention)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from collector import db
from collector.hosts import registry
from collector.models import (
    Artifact,
    Host,
    Incident,
    IncidentSnapshot,
    IncidentState,
    KernelEventRow,
    Line,
    MatrixRun,
    RunStatus,
    Sample,
    sample_rollups,
)
from collector.retention.prune import prune
from collector.timeutil import from_epoch
from tests.collector.conftest import Collector, make_collector
from tests.collector.freeze_support import factory, post, sample

DAY = 86400.0
OLD = 1764400000.0  # the first data's agent-clock ts
RECENT = OLD + 200 * DAY  # 200 days later: past the samples' and lines' retention
XID = "NVRM: Xid (PCI:000f:01:00): 79, pid=2231, name=pt_main_thread, GPU has fallen off the bus."


@pytest.fixture
def small_batches(db_url: str) -> Iterator[Collector]:
    """A collector whose pruning deletes 3 rows a transaction (batching is exercised)."""
    yield from make_collector(db_url, retention_batch_rows=3)


def line(seq: int, ts: float, text: str, *, priority: int, source: str = "kmsg") -> dict[str, Any]:
    kseq = seq if source == "kmsg" else None
    return {
        "seq": seq,
        "ts": ts,
        "source": source,
        "priority": priority,
        "kseq": kseq,
        "text": text,
    }


def feed(c: Collector, token: str, host: str, *, at: float, seq: int) -> None:
    """Ten samples, a routine kernel line, an err kernel line, a journal err, an Xid (an event)."""
    post(
        c,
        token,
        host,
        samples=[sample(seq + i, at + i) for i in range(10)],
        lines=[
            line(seq, at, "usb 1-1: new high-speed USB device", priority=6),
            line(seq + 1, at + 1, "nvme nvme0: I/O 12 QID 3 timeout", priority=3),
            line(seq + 2, at + 2, "systemd: unit failed", priority=3, source="journal"),
            line(seq + 3, at + 3, XID, priority=4),
        ],
    )


def count(c: Collector, stmt: Any) -> int:
    with db.read_scope(factory(c)) as session:
        return int(session.scalar(stmt) or 0)


def samples_of(c: Collector, host: str, *, before: float) -> int:
    return count(
        c,
        select(func.count())
        .select_from(Sample)
        .join(Host, Host.id == Sample.host_id)
        .where(Host.name == host, Sample.ts < before),
    )


def lines_of(c: Collector, *, before: float) -> list[str]:
    with db.read_scope(factory(c)) as session:
        return sorted(session.scalars(select(Line.text).where(Line.ts < before)))


def rollups(c: Collector, *, before: float) -> int:
    table = sample_rollups
    return count(c, select(func.count()).select_from(table).where(table.c.bucket < before))


def evidence(c: Collector, host: str, *, state: IncidentState, resolved: float | None) -> int:
    """An incident of ``host`` with a snapshot and an artifact, and a matrix run of the host."""
    with db.session_scope(factory(c)) as session:
        h = registry.get_host(session, name=host)
        at = from_epoch(OLD)
        incident = Incident(
            host_id=h.id,
            kind="unreachable",
            state=state,
            late_at=at,
            opened_at=at,
            resolved_at=from_epoch(resolved) if resolved is not None else None,
        )
        session.add(incident)
        session.flush()
        session.add(IncidentSnapshot(incident_id=incident.id, taken_at=at, samples=[{"ts": OLD}]))
        session.add(Artifact(incident_id=incident.id, name="journal", stdout=b"Xid 79"))
        session.add(
            MatrixRun(name="soak", host_id=h.id, spec={}, status=RunStatus.SUCCEEDED, created_at=at)
        )
        session.flush()
        return incident.id


def test_each_kind_goes_after_its_days_and_urgent_kernel_lines_stay(
    small_batches: Collector,
) -> None:
    c = small_batches
    token = c.add_host("spark-01")
    feed(c, token, "spark-01", at=OLD, seq=1)
    feed(c, token, "spark-01", at=RECENT, seq=100)
    assert count(c, select(func.count()).select_from(KernelEventRow)) == 2

    run = prune(factory(c), now=RECENT + 3600, settings=c.settings)
    assert samples_of(c, "spark-01", before=RECENT) == 0
    assert samples_of(c, "spark-01", before=RECENT + 3600) == 10
    assert run.deleted["samples"] == 10 and run.batches > 4  # 3 rows a batch
    assert rollups(c, before=RECENT - 60) > 0  # minute rollups: a year
    # The routine kernel line and the journal's err went at 90 days; the kernel err stays a
    # year, and the Xid (priority 4) stays as long as the kernel event that points at it.
    assert lines_of(c, before=RECENT) == sorted(["nvme nvme0: I/O 12 QID 3 timeout", XID])
    assert len(lines_of(c, before=RECENT + 3600)) == 6

    prune(factory(c), now=RECENT + 200 * DAY, settings=c.settings)
    assert rollups(c, before=RECENT - 60) == 0
    assert lines_of(c, before=RECENT) == []
    assert count(c, select(func.count()).select_from(KernelEventRow)) == 1


def test_incidents_with_their_evidence_and_matrix_runs_are_kept_by_default(
    collector: Collector,
) -> None:
    c = collector
    c.add_host("spark-01")
    kept = evidence(c, "spark-01", state=IncidentState.RESOLVED, resolved=OLD)
    prune(factory(c), now=OLD + 1000 * DAY, settings=c.settings)
    with db.read_scope(factory(c)) as session:
        assert session.get(IncidentSnapshot, kept) is not None
        assert session.scalar(select(Artifact.stdout).where(Artifact.incident_id == kept)) == (
            b"Xid 79"
        )
        assert session.scalar(select(func.count()).select_from(MatrixRun)) == 1


def test_a_host_of_its_own_keeps_longer_and_prunes_incidents_once_resolved(
    collector: Collector,
) -> None:
    c = collector
    tokens = {name: c.add_host(name) for name in ("spark-01", "spark-02")}
    for name, token in tokens.items():
        feed(c, token, name, at=OLD, seq=1)
    with db.session_scope(factory(c)) as session:
        registry.get_host(session, name="spark-02").retention = {"samples": 0, "incidents": 30}
    resolved = evidence(c, "spark-02", state=IncidentState.RESOLVED, resolved=OLD)
    still_open = evidence(c, "spark-02", state=IncidentState.OPEN, resolved=None)

    prune(factory(c), now=OLD + 60 * DAY, settings=c.settings)
    assert samples_of(c, "spark-01", before=OLD + DAY) == 0
    assert samples_of(c, "spark-02", before=OLD + DAY) == 10  # 0 days: kept until deleted
    with db.read_scope(factory(c)) as session:
        assert session.get(Incident, resolved) is None
        assert session.get(IncidentSnapshot, resolved) is None  # went with its incident
        assert session.scalar(select(func.count()).select_from(Artifact)) == 1
        assert session.get(Incident, still_open) is not None
        assert session.scalar(select(func.count()).select_from(MatrixRun)) == 2


def test_a_run_stops_at_its_budget_and_the_next_carries_on(db_url: str) -> None:
    for c in make_collector(db_url, retention_batch_rows=4, retention_max_batches=1):
        token = c.add_host("spark-01")
        feed(c, token, "spark-01", at=OLD, seq=1)
        now = OLD + 40 * DAY
        first = prune(factory(c), now=now, settings=c.settings)
        assert first.more and first.deleted == {"samples": 4}
        while prune(factory(c), now=now, settings=c.settings).more:
            pass
        assert samples_of(c, "spark-01", before=now) == 0
        assert samples_of(c, "spark-01", before=now + timedelta(days=1).total_seconds()) == 0
