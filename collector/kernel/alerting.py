"""GPU faults in the kernel log alert at once (``kernel.event``), before any freeze.

At most one alert per host, fault kind and cooldown: an Xid storm is one alert whose payload
counts the lines of the batch that raised it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from collector import links
from collector.alerts import outbox
from collector.alerts.filters import highest
from collector.alerts.notice import Notice
from collector.alerts.notice import lines as notice_lines
from collector.kernel.classify import GPU_FAULT_KINDS
from collector.kernel.read import KernelEventOut, describe_event
from collector.kernel.store import NewKernelEvent
from collector.models import Host, KernelEventRow, Line
from collector.readback.series import lines_json, recent_evidence
from collector.settings import Settings

EVENT = "kernel.event"
MAX_LINES = 20


def enqueue_kernel_events(
    session: Session,
    *,
    host: Host,
    events: Sequence[NewKernelEvent],
    boot_id: str,
    now: datetime,
    settings: Settings,
) -> int:
    """One ``kernel.event`` per GPU-fault kind among newly stored events, at most one per kind
    and cooldown; returns how many deliveries were queued."""
    by_kind: dict[str, list[NewKernelEvent]] = {}
    for event in sorted(events, key=lambda e: e.ts):
        if event.kind in GPU_FAULT_KINDS and event.id is not None:
            by_kind.setdefault(event.kind, []).append(event)
    queued = 0
    cooldown = now - timedelta(seconds=settings.kernel_alert_cooldown_s)
    for kind, faults in by_kind.items():
        key = f"{EVENT}:{kind}:"
        if outbox.queued_since(
            session, host_id=host.id, event=EVENT, key_prefix=key, since=cooldown
        ):
            continue  # an Xid storm: checked before reading its rows back
        hits = session.execute(
            select(KernelEventRow, Line)
            .join(Line, Line.id == KernelEventRow.line_id)
            .where(KernelEventRow.id.in_([e.id for e in faults[:MAX_LINES]]))
            .order_by(KernelEventRow.ts, KernelEventRow.id)
        ).all()
        if not hits:
            continue
        first_line = hits[0][1]
        events_ = [KernelEventOut.of(row, line).model_dump(mode="json") for row, line in hits]
        url = links.absolute(settings, links.host_url(host.name))
        payload = {
            "type": EVENT,
            "event": EVENT,
            "timestamp": now.isoformat(),
            "host": {"name": host.name, "status": host.status, "boot_id": boot_id},
            "kernel_event": events_[0],
            "count": len(faults),
            "lines": lines_json(line for _, line in hits[:MAX_LINES]),
            **recent_evidence(session, host_id=host.id).model_dump(mode="json"),
            "url": url,
        }
        queued += outbox.enqueue(
            session,
            event=EVENT,
            dedup_key=f"{key}{first_line.id}",
            payload=payload,
            text=f"freezewatch: {host.name} kernel {kind}: {first_line.text[:300]}",
            notice=kernel_notice(host, events_[0], first_line, count=len(faults), url=url),
            severity=highest(e.get("severity") for e in events_),
            now=now,
            host_id=host.id,
        )
    return queued


def kernel_notice(host: Host, event: dict[str, Any], line: Line, *, count: int, url: str) -> Notice:
    """The readable alert: what the kernel said, what it means, what to do, where to look."""
    more = f" (x{count})" if count > 1 else ""
    return Notice(
        title=f"freezewatch: {host.name} kernel {event['kind']}{more}",
        body=notice_lines(
            f"{host.name}: {describe_event(event)}",
            f"Kernel line: {line.text[:300]}",
            f"{count} such lines in this batch; one alert per cooldown." if count > 1 else None,
            f"Host status: {host.status}",
            url,
        ),
        level="failure",
    )
