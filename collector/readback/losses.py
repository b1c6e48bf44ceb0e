"""What a host's agent had to give up while it could not ship: its drop-ledger reports.

Agents report drops as cumulative totals per ledger (``agent.drops``), so a report stored twice
or resent after a lost answer adds nothing: each report's loss is its growth over the ledger's
largest totals before it. Reports of older agents (no ledger) are each a loss of their own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector.models import AgentEvent
from collector.schemas import AgentTime, OutModel, ReportedScalar, StreamCounts, on_collector_clock

KEYS = ("samples", "lines", "events")
MAX_REPORTS = 20


def _counts(data: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) if isinstance(v := data.get(k), int) else 0 for k in KEYS}


class LossReport(StreamCounts):
    """One report's loss: when the collector heard of it (``reported_at``), when the drops
    happened (on the collector's time base), and why (``disk_full``, ``spool_full``, ...)."""

    reported_at: float
    first_ts: AgentTime
    last_ts: AgentTime
    reasons: list[ReportedScalar]


class SpoolLosses(OutModel):
    """All a host's agent lost, and its newest reports first (at most ``MAX_REPORTS``)."""

    total: StreamCounts
    reports: list[LossReport]


def spool_losses(session: Session, *, host_id: int, offset: float = 0.0) -> SpoolLosses:
    """What the host's agent reported dropping; ``offset``: the host's clock offset."""
    rows = session.execute(
        select(AgentEvent.ts, AgentEvent.received_at, AgentEvent.data)
        .where(AgentEvent.host_id == host_id, AgentEvent.kind == "spool_dropped")
        .order_by(AgentEvent.received_at, AgentEvent.id)
    )
    total = dict.fromkeys(KEYS, 0)
    seen: dict[str, dict[str, int]] = {}
    reports = []
    for ts, received_at, data in rows:
        data = data if isinstance(data, dict) else {}
        counts = _counts(data)
        ledger = data.get("ledger")
        if isinstance(ledger, str):
            before = seen.get(ledger, dict.fromkeys(KEYS, 0))
            loss = {k: max(0, counts[k] - before[k]) for k in KEYS}
            seen[ledger] = {k: max(counts[k], before[k]) for k in KEYS}
        else:
            loss = counts
        if not any(loss.values()):
            continue
        for key in KEYS:
            total[key] += loss[key]
        first, last = data.get("first_ts"), data.get("last_ts")
        reports.append(
            {
                "reported_at": received_at,
                "first_ts": first if isinstance(first, int | float) else ts,
                "last_ts": last if isinstance(last, int | float) else ts,
                **loss,
                "reasons": list(data.get("reasons") or []),
            }
        )
    return SpoolLosses.model_validate(
        {"total": total, "reports": reports[::-1][:MAX_REPORTS]}, context=on_collector_clock(offset)
    )
