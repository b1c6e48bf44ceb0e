"""The hosts page as a status board: per host, which stretches of the last hour, day and week it
was heard from, its incidents in them, its freezes, and a MemAvailable sparkline.

``host_board`` shape (epoch seconds, the collector's clock for incidents):

- ``ranges``: ``{"1h"|"24h"|"7d": {"since", "step", "covered"}}``; ``covered`` has one character
  per bucket ``since + i * step`` (the last one holds ``now``): ``1`` when samples arrived in it.
- ``mem``: the last hour's lowest MemAvailable per minute, ``{"since", "step", "available":
  [bytes | null per bucket], "total"}``.
- ``incidents``: the spans of the last 7 d (:func:`collector.readback.timeline.incident_spans`).
- ``freezes``: ``{"24h", "7d"}`` counts of ``unreachable`` incidents (suspected freezes) that
  began in them; ``last_freeze``: the newest one ever (a span), or null.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from collector.models import Incident, IncidentKind
from collector.readback.downsample import bucketed_samples
from collector.readback.timeline import incident_spans
from collector.timeutil import to_epoch

# (name, span, bucket): whole minutes, so the per-minute rollups answer.
RANGES = (("1h", 3600, 60), ("24h", 86400, 900), ("7d", 7 * 86400, 3600))
FREEZE_KINDS = (IncidentKind.UNREACHABLE,)


def _buckets(now: float, span: int, step: int) -> tuple[float, int]:
    """(start of the first bucket, bucket count): whole buckets, the last one holding ``now``."""
    count = span // step
    return math.floor(now / step) * step - (count - 1) * step, count


def host_board(session: Session, *, host_id: int, now: float) -> dict[str, Any]:
    ranges: dict[str, Any] = {}
    mem: dict[str, Any] = {}
    for name, span, step in RANGES:
        since, count = _buckets(now, span, step)
        series = bucketed_samples(session, host_id=host_id, since=since, until=now, step=step)
        index = {int((t - since) // step): i for i, t in enumerate(series["t"])}
        covered = "".join("1" if i in index else "0" for i in range(count))
        ranges[name] = {"since": since, "step": step, "covered": covered}
        if name == "1h":
            lows = series["min"].get("mem_available") or []
            totals = [t for t in series["max"].get("mem_total") or [] if t is not None]
            mem = {
                "since": since,
                "step": step,
                "available": [lows[index[i]] if i in index else None for i in range(count)]
                if lows
                else [None] * count,
                "total": max(totals, default=None),
            }
    week = ranges["7d"]["since"]
    spans = incident_spans(session, host_id=host_id, since=week, until=now)
    freezes = [s for s in spans if s["kind"] in FREEZE_KINDS]
    return {
        "ranges": ranges,
        "mem": mem,
        "incidents": spans,
        "freezes": {
            "24h": sum(1 for s in freezes if s["start"] >= now - 86400),
            "7d": sum(1 for s in freezes if s["start"] >= week),
        },
        "last_freeze": freezes[-1] if freezes else last_freeze(session, host_id=host_id),
    }


def last_freeze(session: Session, *, host_id: int) -> dict[str, Any] | None:
    """The host's newest ``unreachable`` incident, as a span, or None."""
    newest = session.execute(
        select(Incident.id, func.coalesce(Incident.last_heartbeat_at, Incident.late_at))
        .where(Incident.host_id == host_id, Incident.kind.in_(FREEZE_KINDS))
        .order_by(func.coalesce(Incident.last_heartbeat_at, Incident.late_at).desc())
        .limit(1)
    ).first()
    if newest is None:
        return None
    at = to_epoch(newest[1])
    assert at is not None
    spans = incident_spans(session, host_id=host_id, since=at, until=at)
    return next((s for s in spans if s["id"] == newest[0]), None)
