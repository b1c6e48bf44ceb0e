"""The hosts page as a status board (``HostBoard``): per host, which stretches of the last hour,
day and week it was heard from, its incidents in them, its freezes, and a MemAvailable
sparkline. Times are epoch seconds on the collector's time base (samples moved by the host's
clock offset, ``collector.readback.timebase``)."""

from __future__ import annotations

import math

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector.models import Host, Incident, IncidentKind
from collector.readback import timebase
from collector.readback.downsample import bucketed_samples
from collector.readback.windows import IncidentSpan, incident_spans
from collector.schemas import OutModel
from collector.timeutil import to_epoch

# (name, span, bucket): whole minutes, so the per-minute rollups answer.
RANGES = (("1h", 3600, 60), ("24h", 86400, 900), ("7d", 7 * 86400, 3600))
FREEZE_KINDS = (IncidentKind.UNREACHABLE,)


class CoveredRange(OutModel):
    """``covered`` has one character per bucket ``since + i * step`` (the last one holds
    ``now``): ``1`` when samples arrived in it, else ``0``."""

    since: float
    step: int
    covered: str


class MemSparkline(OutModel):
    """The last hour's lowest MemAvailable per minute (bytes, null where no sample) and the
    host's MemTotal."""

    since: float
    step: int
    available: list[float | None]
    total: float | None


class HostBoard(OutModel):
    """``ranges`` by name (``1h``, ``24h``, ``7d``); ``incidents`` the spans of the last 7 d;
    ``freezes`` the counts (``24h``, ``7d``) of ``unreachable`` incidents (suspected freezes)
    that began in them; ``last_freeze`` the newest one ever, or null."""

    ranges: dict[str, CoveredRange]
    mem: MemSparkline
    incidents: list[IncidentSpan]
    freezes: dict[str, int]
    last_freeze: IncidentSpan | None


def _buckets(now: float, span: int, step: int) -> tuple[float, int]:
    """(start of the first bucket, bucket count): whole buckets, the last one holding ``now``."""
    count = span // step
    return math.floor(now / step) * step - (count - 1) * step, count


def host_board(session: Session, *, host: Host, now: float) -> HostBoard:
    offset = timebase.offset_s(host)
    ranges: dict[str, CoveredRange] = {}
    mem: MemSparkline | None = None
    for name, span, step in RANGES:
        since, count = _buckets(now, span, step)
        series = bucketed_samples(
            session, host_id=host.id, since=since, until=now, step=step, offset=offset
        )
        index = {int((t - since) // step): i for i, t in enumerate(series.t)}
        covered = "".join("1" if i in index else "0" for i in range(count))
        ranges[name] = CoveredRange(since=since, step=step, covered=covered)
        if name == "1h":
            lows = series.min.get("mem_available") or [None] * len(series.t)
            totals = [t for t in series.max.get("mem_total") or [] if t is not None]
            mem = MemSparkline(
                since=since,
                step=step,
                available=[lows[index[i]] if i in index else None for i in range(count)],
                total=max(totals, default=None),
            )
    assert mem is not None
    week = ranges["7d"].since
    spans = incident_spans(session, host_id=host.id, since=week, until=now)
    freezes = [s for s in spans if s.kind in FREEZE_KINDS]
    return HostBoard(
        ranges=ranges,
        mem=mem,
        incidents=spans,
        freezes={
            "24h": sum(1 for s in freezes if s.start >= now - 86400),
            "7d": sum(1 for s in freezes if s.start >= week),
        },
        last_freeze=freezes[-1] if freezes else last_freeze(session, host_id=host.id),
    )


def last_freeze(session: Session, *, host_id: int) -> IncidentSpan | None:
    """The host's newest ``unreachable`` incident, as a span, or None."""
    silence_start = func.coalesce(Incident.last_heartbeat_at, Incident.late_at)
    newest = session.execute(
        select(Incident.id, silence_start)
        .where(Incident.host_id == host_id, Incident.kind.in_(FREEZE_KINDS))
        .order_by(silence_start.desc())
        .limit(1)
    ).first()
    if newest is None:
        return None
    at = to_epoch(newest[1])
    assert at is not None
    spans = incident_spans(session, host_id=host_id, since=at, until=at)
    return next((s for s in spans if s.id == newest[0]), None)
