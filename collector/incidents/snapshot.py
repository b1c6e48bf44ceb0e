"""The last-gasp evidence, copied when an incident opens so it never needs the host back."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import Host, Incident, IncidentSnapshot, Line, Sample
from collector.readback.series import lines_json, samples_json
from collector.timeutil import to_epoch

SNAPSHOT_MAX_SAMPLES = 2000
SNAPSHOT_MAX_LINES = 5000


def take_snapshot(
    session: Session, *, incident: Incident, host: Host, window_s: float, now: datetime
) -> IncidentSnapshot:
    """Copy the samples and lines received in the ``window_s`` before the last heartbeat."""
    end = to_epoch(host.last_seen_at) or now.timestamp()
    start = end - window_s
    samples = list(
        session.scalars(
            select(Sample)
            .where(
                Sample.host_id == host.id,
                Sample.received_at >= start,
                Sample.received_at <= end + 1,
            )
            .order_by(Sample.ts.desc())
            .limit(SNAPSHOT_MAX_SAMPLES)
        )
    )[::-1]
    lines = list(
        session.scalars(
            select(Line)
            .where(Line.host_id == host.id, Line.received_at >= start, Line.received_at <= end + 1)
            .order_by(Line.ts.desc(), Line.id.desc())
            .limit(SNAPSHOT_MAX_LINES)
        )
    )[::-1]
    last = samples[-1] if samples else None
    snapshot = IncidentSnapshot(
        incident_id=incident.id,
        taken_at=now,
        window_start=start,
        window_end=end,
        samples=samples_json(samples),
        lines=lines_json(lines),
        context={
            "vllm": (last.data or {}).get("vllm") if last else None,
            # Filled in by the matrix runner's issue: the run/profile active at the time.
            "matrix_run": None,
        },
    )
    session.add(snapshot)
    session.flush()
    return snapshot
