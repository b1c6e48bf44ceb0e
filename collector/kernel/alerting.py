"""GPU faults and fatal kernel events alert at once (``kernel.event``), before any freeze.

At most one alert per occurrence (host, kind, code, device) and cooldown: an Xid storm is one
alert whose payload carries the occurrence's count, first and last seen, severity and action.
A fault that names no device and the same fault on a named one are one incident (the RC
watchdog's "GPU is probably locked" and the Xid 8 that names the GPU): one alert, the named
one's when both come in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.kernel.classify import GPU_FAULT_KINDS
from collector import links
from collector.alerts import outbox
from collector.alerts.filters import highest
from collector.alerts.notice import Notice
from collector.alerts.notice import lines as notice_lines
from collector.kernel.occurrences import occurrence_key
from collector.kernel.read import KernelEventOut, OccurrenceOut, describe_event
from collector.kernel.store import NewKernelEvent
from collector.models import Host, KernelEventRow, KernelOccurrence, Line, Severity
from collector.readback.series import lines_json, recent_evidence
from collector.settings import Settings

EVENT = "kernel.event"
MAX_LINES = 20


def enqueue_kernel_events(
    session: Session,
    *,
    host_id: int,
    events: Sequence[NewKernelEvent],
    boot_id: str,
    now: datetime,
    settings: Settings,
) -> int:
    """One ``kernel.event`` per occurrence among newly stored GPU faults and fatal events, at
    most one per occurrence and cooldown; returns how many deliveries were queued. The host's
    row is read only for an alert to build: an Xid storm inside its cooldown never needs it."""
    by_key: dict[tuple[str, str, str], list[NewKernelEvent]] = {}
    for event in sorted(events, key=lambda e: e.ts):
        if alerts_on(event.event) and event.id is not None:
            by_key.setdefault(occurrence_key(event.event), []).append(event)
    queued = 0
    cooldown = now - timedelta(seconds=settings.kernel_alert_cooldown_s)
    named = {(kind, code) for kind, code, device in by_key if device}
    for (kind, code, device), faults in by_key.items():
        if not device and (kind, code) in named:
            continue  # restated by the same fault on a named device in this batch
        fault = f"{EVENT}:{kind}:{code}:"
        key = f"{fault}{device}:"
        if _cooling(session, host_id=host_id, fault=fault, device=device, since=cooldown):
            continue  # an Xid storm: checked before reading its rows back
        hits = session.execute(
            select(KernelEventRow, Line)
            .join(Line, Line.id == KernelEventRow.line_id)
            .where(KernelEventRow.id.in_([e.id for e in faults[:MAX_LINES]]))
            .order_by(KernelEventRow.ts, KernelEventRow.id)
        ).all()
        if not hits:
            continue
        host = session.get_one(Host, host_id)
        first, first_line = hits[0]
        events_ = [KernelEventOut.of(row, line).model_dump(mode="json") for row, line in hits]
        occurrence = (
            session.get(KernelOccurrence, first.occurrence_id) if first.occurrence_id else None
        )
        url = links.absolute(settings, links.host_url(host.name))
        payload = {
            "type": EVENT,
            "event": EVENT,
            "timestamp": now.isoformat(),
            "host": {"name": host.name, "status": host.status, "boot_id": boot_id},
            "kernel_event": events_[0],
            "count": len(faults),
            "occurrence": None
            if occurrence is None
            else OccurrenceOut.model_validate(occurrence).model_dump(mode="json"),
            "lines": lines_json(line for _, line in hits[:MAX_LINES]),
            **recent_evidence(session, host_id=host.id).model_dump(mode="json"),
            "url": url,
        }
        queued += outbox.enqueue(
            session,
            event=EVENT,
            dedup_key=f"{key}{first_line.id}",
            payload=payload,
            text=_text(host.name, first, first_line),
            notice=kernel_notice(host, events_[0], first_line, count=len(faults), url=url),
            severity=highest(e.get("severity") for e in events_),
            now=now,
            host_id=host.id,
        )
    return queued


def _cooling(session: Session, *, host_id: int, fault: str, device: str, since: datetime) -> bool:
    """Whether the fault (``kernel.event:<kind>:<code>:``) on ``device`` alerted since ``since``:
    with no device, it on any device did; on a named one, it did, or the same fault with no
    device did and no other named device has shown it since (that alert covers one GPU: the
    first named after it; another GPU's is another fault)."""
    own = f"{fault}{device}:" if device else fault
    if outbox.queued_since(session, host_id=host_id, event=EVENT, key_prefix=own, since=since):
        return True
    unnamed = device and outbox.queued_key_since(
        session, host_id=host_id, event=EVENT, key_prefix=f"{fault}:", since=since
    )
    if not unnamed:
        return False
    _, kind, code, _ = fault.split(":", 3)
    after = unnamed.rsplit(":", 1)[1]  # the device-less alert's first line
    other = session.scalar(
        select(KernelEventRow.id)
        .where(
            KernelEventRow.host_id == host_id,
            KernelEventRow.kind == kind,
            KernelEventRow.code == code,
            KernelEventRow.device.not_in(("", device)),
            KernelEventRow.line_id > int(after),
        )
        .limit(1)
    )
    return other is None


def alerts_on(event: object) -> bool:
    """GPU faults (except purely informational ones) and fatal events of any kind alert: a
    fatal ``aer`` does, a non-fatal one (any PCIe device's, the link still up) and an ``iommu``
    fault (any device's DMA refused, never fatal) stay quiet."""
    severity = getattr(event, "severity", None)
    if getattr(event, "kind", None) in GPU_FAULT_KINDS:
        return severity != Severity.INFO
    return severity == Severity.FATAL


def _text(host: str, event: KernelEventRow, line: Line) -> str:
    what = " ".join(p for p in (event.kind, event.code) if p)
    return (
        f"freezewatch: {host} kernel {what} ({event.severity}, action {event.action}): "
        f"{line.text[:300]}"
    )


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
